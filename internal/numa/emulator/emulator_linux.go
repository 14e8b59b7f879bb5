// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package emulator

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/numapref/numapref/internal/fsutil"
	"github.com/numapref/numapref/internal/numa"
	"github.com/numapref/numapref/internal/numa/prctl"
)

// Emulator emulates PR_PREFERRED_NID; see the package documentation.
type Emulator struct {
	procRoot    string
	stateDir    string
	syncTimeout time.Duration
	numPossible int
	now         func() uint64
	store       *store

	page      *listenerPage // nil if the shared page is unavailable
	listener  *listener     // nil unless this emulator listens
	listenWhy string        // why it does not
	traceOpts cloneTraceOptions
	kcmpOK    bool
	audit     *auditLog // nil unless AuditTo was called

	closeOnce sync.Once
	// closeMu keeps Close from unmapping the shared page under a running call; after
	// Close, calls fail with errClosed instead of touching released state.
	closeMu sync.RWMutex
	closed  bool
	// forcedAt caches meta.json's FirstForcedAt once it is set: it changes only when a new
	// boot wipes the state, at New, so every fork event and lookup need not read it again.
	forcedAt atomic.Uint64
}

var errClosed = errors.New("emulator: closed")

// New opens (or creates) the emulated state in opts.StateDir. State left by a previous
// boot is wiped, and entries of tasks that no longer exist are dropped.
func New(opts Options) (*Emulator, error) {
	if opts.StateDir == "" {
		return nil, errors.New("emulator: no state directory")
	}
	e := &Emulator{
		procRoot:    opts.ProcRoot,
		stateDir:    opts.StateDir,
		syncTimeout: opts.SyncTimeout,
		now:         opts.now,
	}
	e.traceOpts = cloneTraceOptions{Root: opts.TracefsRoot, SysRoot: opts.SysRoot, AllowPrivateMount: opts.TracefsRoot == ""}
	if e.procRoot == "" {
		e.procRoot = "/proc"
	}
	sysRoot := cmp.Or(opts.TopologyRoot, opts.SysRoot, "/sys")
	if e.syncTimeout <= 0 {
		e.syncTimeout = defaultSyncTimeout
	}
	if e.now == nil {
		e.now = nowTicks
	}
	var err error
	if e.numPossible, err = numPossibleNodes(sysRoot); err != nil {
		return nil, fmt.Errorf("emulator: %w", err)
	}
	if e.store, err = openStore(opts.StateDir, opts.SharedState); err != nil {
		return nil, fmt.Errorf("emulator: %w", err)
	}
	if err := e.checkBoot(); err != nil {
		e.store.close()
		return nil, fmt.Errorf("emulator: %w", err)
	}
	if err := e.sweep(); err != nil {
		e.store.close()
		return nil, fmt.Errorf("emulator: %w", err)
	}
	if e.page, err = openListenerPage(opts.StateDir, e.store.fileMode); err != nil {
		e.listenWhy = err.Error()
	}
	switch {
	case !opts.ForkEvents:
		e.listenWhy = "fork events not requested"
	case e.page != nil:
		if e.listener, err = startListener(e, e.page); err != nil {
			e.listenWhy = err.Error()
		}
	}
	_, err = kcmp(os.Getpid(), os.Getpid(), kcmpVM)
	e.kcmpOK = err == nil
	return e, nil
}

// numPossibleNodes is num_possible_nodes(); a kernel without NUMA in sysfs has one node.
func numPossibleNodes(sysRoot string) (int, error) {
	data, err := os.ReadFile(filepath.Join(sysRoot, "devices", "system", "node", "possible"))
	if errors.Is(err, fs.ErrNotExist) {
		return 1, nil
	}
	if err != nil {
		return 0, fmt.Errorf("reading possible nodes: %w", err)
	}
	ids, err := numa.ParseList(string(data))
	if err != nil {
		return 0, fmt.Errorf("reading possible nodes: %w", err)
	}
	return len(ids), nil
}

// checkBoot wipes state made under another boot: the kernel's state does not survive
// a reboot.
func (e *Emulator) checkBoot() error {
	data, err := os.ReadFile(filepath.Join(e.procRoot, "sys", "kernel", "random", "boot_id"))
	if err != nil {
		return nil // no boot id to compare with
	}
	bootID := strings.TrimSpace(string(data))
	return e.store.withLock(func() error {
		m, err := e.store.readMeta()
		if err != nil || m.BootID == bootID {
			return err
		}
		if m.BootID == "" { // new state, or made without a boot id to compare with
			m.BootID = bootID
			return e.store.writeMeta(m)
		}
		if err := e.store.wipe(); err != nil {
			return err
		}
		return e.store.writeMeta(emulatorMeta{BootID: bootID})
	})
}

// sweep drops entries whose task no longer exists (or whose pid was recycled).
func (e *Emulator) sweep() error {
	tgids, err := e.store.groups()
	if err != nil {
		return err
	}
	return e.store.withLock(func() error {
		for _, tgid := range tgids {
			entries, err := e.store.groupEntries(tgid)
			if err != nil {
				return err
			}
			for _, ent := range entries {
				if t, err := numa.ReadTask(e.procRoot, ent.TID); err == nil && t.StartTime == ent.Start {
					continue
				}
				if err := e.store.removeEntry(tgid, ent.TID); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// Close stops listening and releases the state directory. The state stays.
func (e *Emulator) Close() error {
	var err error
	e.closeOnce.Do(func() {
		e.closeMu.Lock()
		defer e.closeMu.Unlock()
		e.closed = true
		if e.listener != nil {
			e.listener.stop()
		}
		if e.page != nil {
			err = e.page.close()
		}
		if closeErr := e.store.close(); err == nil {
			err = closeErr
		}
		if e.audit != nil {
			e.audit.close()
		}
	})
	return err
}

// Get returns the forced preferred node of task tid (0: the calling thread).
func (e *Emulator) Get(tid int) (int, error) { return prctl.GetViaRaw(e, tid) }

// Set forces the preferred node of task tid (0: the calling thread); nid -1 clears it.
func (e *Emulator) Set(tid, nid int) error { return prctl.SetViaRaw(e, tid, nid) }

// Call emulates prctl(PR_PREFERRED_NID, cmd, pid, nid, ptr), checks in the patch's order.
func (e *Emulator) Call(cmd, pid, nid int, ptr prctl.UserPointer) (int, error) {
	e.closeMu.RLock()
	defer e.closeMu.RUnlock()
	if e.closed {
		return prctl.PointerSentinel, errClosed
	}
	if uint(cmd) >= 2 { // cmd is an unsigned long: PR_PREFERRED_NID_CMD_MAX
		return prctl.PointerSentinel, unix.ERANGE
	}
	tid := int(int32(pid)) // pid_t
	if tid == 0 {
		tid = unix.Gettid()
	}
	if tid < 0 {
		return prctl.PointerSentinel, unix.ESRCH
	}
	t, err := e.readTarget(tid)
	if errors.Is(err, numa.ErrTaskGone) {
		return prctl.PointerSentinel, unix.ESRCH
	}
	if err != nil {
		return prctl.PointerSentinel, err
	}
	caller, err := e.readCaller()
	if err != nil {
		return prctl.PointerSentinel, err
	}
	if !mayAccess(caller, t.status, t.dumpable) {
		return prctl.PointerSentinel, unix.EPERM
	}
	if cmd == prctl.CmdGet {
		return e.get(t, ptr)
	}
	n := int(int32(nid)) // the patch's int nid
	if n < numa.NoNode || n >= e.numPossible {
		return prctl.PointerSentinel, unix.EINVAL
	}
	if err := e.set(t, n); err != nil {
		return prctl.PointerSentinel, err
	}
	if e.audit != nil {
		e.audit.record(e.procRoot, t, n)
	}
	return prctl.PointerSentinel, nil
}

// get is the GET command on task t, once the caller may access it: the user pointer is
// checked before the value is read.
func (e *Emulator) get(t target, ptr prctl.UserPointer) (int, error) {
	switch ptr {
	case prctl.PointerValid:
	case prctl.PointerMisaligned:
		return prctl.PointerSentinel, unix.EINVAL
	case prctl.PointerNil:
		return prctl.PointerSentinel, unix.EFAULT
	default:
		return prctl.PointerSentinel, fmt.Errorf("invalid user pointer model %d", int(ptr))
	}
	ent, err := e.resolve(t)
	if err != nil {
		return prctl.PointerSentinel, err
	}
	return ent.Force, nil
}

// target is what the emulator reads about the task a call names.
type target struct {
	task     numa.Task
	status   taskStatus
	dumpable bool
}

func (t target) tgid() int { return t.status.TGID }

func (e *Emulator) readTarget(tid int) (target, error) {
	task, err := numa.ReadTask(e.procRoot, tid)
	if err != nil {
		return target{}, err
	}
	status, owner, err := numa.ReadTaskFileOwner(e.procRoot, tid, "status")
	if err != nil {
		return target{}, err
	}
	st, err := parseStatus(string(status))
	if err != nil {
		return target{}, fmt.Errorf("task %d: %w", tid, err)
	}
	// /proc/<pid> files belong to the task's effective uid, or to root when the task is not
	// dumpable. With an effective uid of 0 the two cannot be told apart.
	return target{task: task, status: st, dumpable: owner == st.UID[1]}, nil
}

// readCaller reads the calling thread's credentials: the kernel checks the current task's.
func (e *Emulator) readCaller() (taskStatus, error) {
	data, err := fsutil.ReadFileInto(filepath.Join(e.procRoot, "thread-self", "status"), nil)
	if err != nil {
		return taskStatus{}, fmt.Errorf("reading the caller's credentials: %w", err)
	}
	st, err := parseStatus(string(data))
	if err != nil {
		return taskStatus{}, fmt.Errorf("reading the caller's credentials: %w", err)
	}
	return st, nil
}

func defaultEntry(tgid int, t numa.Task) taskEntry {
	return taskEntry{TID: t.TID, TGID: tgid, Start: t.StartTime, Force: numa.NoNode, Preferred: numa.NoNode}
}

// resolve returns the emulated values of a live task: its entry if the state has one for
// this very task; otherwise the default, either known (nothing could have been inherited,
// or the listener saw the birth and recorded nothing) or assumed (then recorded and
// counted).
func (e *Emulator) resolve(t target) (taskEntry, error) {
	ent, ok, err := e.store.readEntry(t.tgid(), t.task.TID)
	if err != nil {
		return taskEntry{}, err
	}
	if ok && ent.Start == t.task.StartTime {
		return ent, nil
	}
	def := defaultEntry(t.tgid(), t.task)
	forcedAt, err := e.firstForcedAt()
	if err != nil {
		return taskEntry{}, err
	}
	if forcedAt == 0 || t.task.StartTime < forcedAt {
		return def, nil // born before anything was forced
	}
	if e.page != nil && e.page.waitHandled(t.task.StartTime, e.syncTimeout, e.listener) {
		ent, ok, err := e.store.readEntry(t.tgid(), t.task.TID)
		if err != nil {
			return taskEntry{}, err
		}
		if ok && ent.Start == t.task.StartTime {
			return ent, nil
		}
		return def, nil
	}
	result := def
	err = e.store.withLock(func() error {
		if ent, ok, err := e.store.readEntry(t.tgid(), t.task.TID); err != nil {
			return err
		} else if ok && ent.Start == t.task.StartTime {
			result = ent
			return nil
		}
		result.Origin = originAssumedFresh
		return e.assumeFreshLocked(t.tgid(), t.task, false)
	})
	return result, err
}

// firstForcedAt is meta.json's FirstForcedAt: 0 while nothing was ever forced.
func (e *Emulator) firstForcedAt() (uint64, error) {
	if at := e.forcedAt.Load(); at != 0 {
		return at, nil
	}
	meta, err := e.store.readMeta()
	if err != nil {
		return 0, err
	}
	e.forcedAt.Store(meta.FirstForcedAt)
	return meta.FirstForcedAt, nil
}

func (e *Emulator) set(t target, nid int) error {
	return e.store.withLock(func() error {
		if nid != numa.NoNode && e.forcedAt.Load() == 0 {
			var at uint64
			err := e.store.updateMeta(func(m *emulatorMeta) {
				if m.FirstForcedAt == 0 {
					m.FirstForcedAt = e.now()
				}
				at = m.FirstForcedAt
			})
			if err != nil {
				return err
			}
			e.forcedAt.Store(at)
		}
		return e.store.writeEntry(taskEntry{
			TID: t.task.TID, TGID: t.tgid(), Start: t.task.StartTime,
			Force: nid, Preferred: nid, Origin: originSet,
		})
	})
}

// inherit records that child got from's values at birth, unless the child already has an
// entry (a SET after the birth wins, as in the kernel).
func (e *Emulator) inherit(tgid int, child numa.Task, from taskEntry) error {
	if from.isDefault() {
		return nil
	}
	return e.store.withLock(func() error {
		if ent, ok, err := e.store.readEntry(tgid, child.TID); err != nil || (ok && ent.Start == child.StartTime) {
			return err
		}
		// The count first: whoever reads the entry (without the lock) then sees it counted.
		if err := e.store.updateMeta(func(m *emulatorMeta) { m.Inherited++ }); err != nil {
			return err
		}
		return e.store.writeEntry(taskEntry{
			TID: child.TID, TGID: tgid, Start: child.StartTime,
			Force: from.Force, Preferred: from.Preferred, Origin: originInherited,
		})
	})
}

func (e *Emulator) assumeFresh(tgid int, t numa.Task) error {
	return e.store.withLock(func() error { return e.assumeFreshLocked(tgid, t, false) })
}

// assumeFreshLocked records t as a fresh task (-1) whose origin is unknown, and counts it.
// Unless overwrite, an entry the task already has is kept.
func (e *Emulator) assumeFreshLocked(tgid int, t numa.Task, overwrite bool) error {
	if !overwrite {
		if ent, ok, err := e.store.readEntry(tgid, t.TID); err != nil || (ok && ent.Start == t.StartTime) {
			return err
		}
	}
	ent := defaultEntry(tgid, t)
	ent.Origin = originAssumedFresh
	// The count first, as in inherit.
	if err := e.store.updateMeta(func(m *emulatorMeta) { m.AssumedFresh++ }); err != nil {
		return err
	}
	return e.store.writeEntry(ent)
}

// SchedNUMA returns the task's NUMA lines of /proc/<tid>/sched with the emulated
// numa_preferred_nid_force, and the emulated numa_preferred_nid once the emulator set one.
func (e *Emulator) SchedNUMA(tid int) (numa.SchedNUMA, error) {
	e.closeMu.RLock()
	defer e.closeMu.RUnlock()
	if e.closed {
		return numa.SchedNUMA{}, errClosed
	}
	t, err := e.readTarget(tid)
	if err != nil {
		return numa.SchedNUMA{}, err
	}
	s, err := numa.ReadSchedNUMA(e.procRoot, tid)
	if err != nil { // a kernel without CONFIG_SCHED_DEBUG: only the emulated lines
		s = numa.SchedNUMA{PreferredNID: numa.NoNode, CurrentNode: numa.NoNode}
	}
	ent, err := e.resolve(t)
	if err != nil {
		return numa.SchedNUMA{}, err
	}
	s.Present, s.ForcePresent = true, true
	s.PreferredNIDForce = ent.Force
	if ent.Origin == originSet || ent.Force != numa.NoNode {
		s.PreferredNID = ent.Preferred
	}
	return s, nil
}

// Support describes the emulator and how it learns about new tasks.
func (e *Emulator) Support() numa.Support {
	e.closeMu.RLock()
	defer e.closeMu.RUnlock()
	if e.closed {
		return numa.Support{Backend: "emulator", Reason: errClosed.Error()}
	}
	var events string
	switch {
	case e.listener != nil:
		events = "this process listens to the proc connector"
		if e.listener.trace != nil {
			events += " and reads clone flags from task:task_newtask (" + e.listener.trace.source + ")"
		} else {
			events += " without clone flags (" + e.listener.traceWhy + ")"
		}
	case e.page != nil && e.page.active():
		events = fmt.Sprintf("process %d listens to the proc connector", atomic.LoadUint64(e.page.u64(offPID)))
		if atomic.LoadUint64(e.page.u64(offFlags))&flagCloneTrace != 0 {
			events += " and reads clone flags from task:task_newtask"
		}
	default:
		events = "nobody listens to the proc connector (" + e.listenWhy + "): new tasks after a SET are assumed fresh"
	}
	return numa.Support{
		Supported: true,
		Backend:   "emulator",
		Reason:    fmt.Sprintf("emulated in %s; %s; kcmp available: %v", e.stateDir, events, e.kcmpOK),
	}
}

// Stats reports the emulator's counters.
func (e *Emulator) Stats() Stats {
	var s Stats
	e.closeMu.RLock()
	defer e.closeMu.RUnlock()
	if e.closed {
		return s
	}
	if m, err := e.store.readMeta(); err == nil {
		s.AssumedFresh, s.Inherited = m.AssumedFresh, m.Inherited
	}
	if tgids, err := e.store.groups(); err == nil {
		for _, tgid := range tgids {
			names, _ := readDirNames(e.store.groupDir(tgid))
			s.Tasks += len(names)
		}
	}
	s.Listening = e.listener != nil
	s.KCMP = e.kcmpOK
	if e.page != nil {
		s.ListenerActive = e.page.active()
		s.EventsLost = atomic.LoadUint64(e.page.u64(offLost))
		s.CloneTrace = s.ListenerActive && atomic.LoadUint64(e.page.u64(offFlags))&flagCloneTrace != 0
	}
	if e.listener != nil {
		e.listener.mu.Lock()
		s.HandlingErrors = e.listener.errors
		if e.listener.lastErr != nil {
			s.LastError = e.listener.lastErr.Error()
		}
		e.listener.mu.Unlock()
	}
	return s
}
