// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package emulator

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/numapref/numapref/internal/numa"
)

// The listener is the one emulator process that follows task creation through the proc
// connector and records what each new task inherited. It holds an exclusive flock on the
// state directory's "listener" file for as long as it listens, and publishes its progress
// in that file's first page, which every emulator maps:
//
//	off  0  magic        listenerMagic while a listener is active
//	off  8  pid          the listener's pid
//	off 16  watchSince   clock tick after which every new task is seen
//	off 24  watermark    CLOCK_MONOTONIC ns: every event queued before it has been handled
//	off 32  seq          futex word, bumped with the watermark
//	off 40  lost         count of overflows (lost events)
//	off 48  flags        flagCloneTrace: the listener reads clone flags from tracefs
//
// A lookup of a task the state does not know, born after watchSince, waits until the
// watermark passes the time of the lookup: the listener has then handled the task's birth,
// and the absence of an entry means the task holds the default.
const (
	listenerMagic      = 0x4e554d4150524546 // "NUMAPREF"
	listenerPageSize   = 4096
	offMagic           = 0
	offPID             = 8
	offWatchSince      = 16
	offWatermark       = 24
	offSeq             = 32
	offLost            = 40
	offFlags           = 48
	flagCloneTrace     = 1
	futexWaitOp        = 0 // FUTEX_WAIT (shared: the page is mapped by several processes)
	futexWakeOp        = 1 // FUTEX_WAKE
	kcmpVM             = 1 // KCMP_VM
	sweepEvery         = time.Minute
	addrNoRandomize    = 0x0040000
	defaultSyncTimeout = 2 * time.Second
	// traceWait bounds the wait for a task_newtask event that the trace has not delivered
	// yet. The tracepoint fires a few microseconds after the proc connector's event and
	// before the child first runs, so the wait is short unless the machine is stalled.
	traceWait = 500 * time.Millisecond
)

// listenerPage is a mapping of the shared page.
type listenerPage struct {
	f    *os.File
	data []byte
}

func openListenerPage(dir string, mode os.FileMode) (*listenerPage, error) {
	path := filepath.Join(dir, "listener")
	writable := true
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, mode)
	if err != nil {
		writable = false
		if f, err = os.Open(path); err != nil {
			return nil, fmt.Errorf("opening emulator listener page: %w", err)
		}
	}
	prot := unix.PROT_READ
	if writable {
		_ = f.Chmod(mode)
		if err := f.Truncate(listenerPageSize); err != nil {
			f.Close()
			return nil, fmt.Errorf("sizing emulator listener page: %w", err)
		}
		prot |= unix.PROT_WRITE
	} else if fi, err := f.Stat(); err != nil || fi.Size() < listenerPageSize {
		f.Close()
		return nil, errors.New("emulator listener page is not initialized")
	}
	data, err := unix.Mmap(int(f.Fd()), 0, listenerPageSize, prot, unix.MAP_SHARED)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("mapping emulator listener page: %w", err)
	}
	return &listenerPage{f: f, data: data}, nil
}

func (p *listenerPage) u64(off int) *uint64 { return (*uint64)(unsafe.Pointer(&p.data[off])) }

//nolint:unparam // an accessor by offset like u64; the page has one 32-bit field today
func (p *listenerPage) u32(off int) *uint32 { return (*uint32)(unsafe.Pointer(&p.data[off])) }

func (p *listenerPage) close() error {
	err := unix.Munmap(p.data)
	if closeErr := p.f.Close(); err == nil {
		err = closeErr
	}
	return err
}

// active reports whether some process (maybe this one) holds the listener lock and has
// published its page.
func (p *listenerPage) active() bool {
	if atomic.LoadUint64(p.u64(offMagic)) != listenerMagic {
		return false
	}
	// A second open file description conflicts with the listener's, even in its own process.
	f, err := os.Open(p.f.Name())
	if err != nil {
		return false
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB); err == nil {
		return false // nobody holds it: the magic is left over from a listener that died
	}
	return true
}

// waitHandled waits until the listener has handled every event queued before now, or
// timeout passes. born is the start tick of the task the caller asks about; the wait is
// useless (false) for a task born before the listener started watching.
// local, when not nil, is this process's own listener: the wait is then on its Go
// signal instead of the shared page's futex (see listener.published).
func (p *listenerPage) waitHandled(born uint64, timeout time.Duration, local *listener) bool {
	if !p.active() || born <= atomic.LoadUint64(p.u64(offWatchSince)) {
		return false
	}
	target := monotonicNow()
	emitBarrier()
	deadline := time.Now().Add(timeout)
	for {
		seq := atomic.LoadUint32(p.u32(offSeq))
		var published <-chan struct{}
		if local != nil {
			published = local.nextPublish()
		}
		if int64(atomic.LoadUint64(p.u64(offWatermark))) >= target {
			// A listener that restarted in between watches from a later tick.
			return atomic.LoadUint64(p.u64(offMagic)) == listenerMagic &&
				born > atomic.LoadUint64(p.u64(offWatchSince))
		}
		remaining := time.Until(deadline)
		if remaining <= 0 || !p.active() {
			return false
		}
		if published == nil {
			futexWait(p.u32(offSeq), seq, remaining)
			continue
		}
		t := time.NewTimer(remaining)
		select {
		case <-published:
		case <-t.C:
		}
		t.Stop()
	}
}

// emitBarrier makes the kernel send a proc connector event (a COMM event: the calling
// thread renames itself to its own name), which wakes a listener that waits for events.
func emitBarrier() {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var name [16]byte
	if unix.Prctl(unix.PR_GET_NAME, uintptr(unsafe.Pointer(&name[0])), 0, 0, 0) == nil {
		_ = unix.Prctl(unix.PR_SET_NAME, uintptr(unsafe.Pointer(&name[0])), 0, 0, 0)
	}
}

func futexWait(addr *uint32, val uint32, d time.Duration) {
	ts := unix.NsecToTimespec(d.Nanoseconds())
	_, _, _ = unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), futexWaitOp, uintptr(val), uintptr(unsafe.Pointer(&ts)), 0, 0)
}

func futexWake(addr *uint32) {
	_, _, _ = unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), futexWakeOp, uintptr(1<<31-1), 0, 0, 0)
}

// monotonicNow is the current CLOCK_MONOTONIC in nanoseconds: the clock of the proc
// connector's events and of the listener's watermark.
func monotonicNow() int64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

// nowTicks is the current CLOCK_BOOTTIME in clock ticks (USER_HZ, 100 on every
// architecture), the unit of the start time in /proc/<pid>/stat.
func nowTicks() uint64 {
	ns, _ := numa.BoottimeNs()
	return ns / uint64(time.Second/numa.TicksPerSecond)
}

// waitNextTick returns once the tick count is past t, so that a task made afterwards has a
// start time strictly greater than t. It gives up after a few ticks (a stopped test clock).
func waitNextTick(now func() uint64, t uint64) {
	for range 3 {
		if now() > t {
			return
		}
		ns, _ := numa.BoottimeNs()
		tick := uint64(time.Second / numa.TicksPerSecond)
		time.Sleep(time.Duration(tick - ns%tick))
	}
}

func kcmp(pid1, pid2, typ int) (int, error) {
	r, _, errno := unix.Syscall6(unix.SYS_KCMP, uintptr(pid1), uintptr(pid2), uintptr(typ), 0, 0, 0)
	if errno != 0 {
		return 0, errno
	}
	return int(r), nil
}

// listener follows the proc connector for an Emulator.
type listener struct {
	e    *Emulator
	conn *numa.ProcConn
	page *listenerPage
	done chan struct{}
	// trace, if not nil, gives each new task's clone flags and creator (task_newtask);
	// traceWhy says why there is none.
	trace    *cloneTrace
	traceWhy string

	mu        sync.Mutex
	lastErr   error
	errors    uint64
	lastSweep time.Time

	// published is closed, and replaced, at every publish: a lookup in this process waits
	// on it, in the Go scheduler, rather than in a futex system call, which would keep the
	// waiting goroutine's processor from the listener's goroutine until the runtime's
	// monitor takes it back (up to 10 ms on an idle process): the wait for the listener
	// would then wait for the listener's own turn to run.
	pubMu     sync.Mutex
	published chan struct{}
}

// nextPublish is a channel closed at the next publish.
func (l *listener) nextPublish() <-chan struct{} {
	l.pubMu.Lock()
	defer l.pubMu.Unlock()
	return l.published
}

// startListener makes e the machine's listener if no other process is, and if the proc
// connector can be opened. It returns nil and the reason otherwise.
func startListener(e *Emulator, page *listenerPage) (*listener, error) {
	if page.data == nil || !pageWritable(page) {
		return nil, errors.New("the listener page is not writable by this process")
	}
	if err := unix.Flock(int(page.f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		pid := atomic.LoadUint64(page.u64(offPID))
		return nil, fmt.Errorf("another process (pid %d) listens", pid)
	}
	// The trace first: every fork event the connector delivers then has its tracepoint on.
	trace, err := openCloneTrace(e.traceOpts)
	traceWhy := ""
	if err != nil {
		traceWhy = err.Error()
	}
	conn, err := numa.DialProcConnector()
	if err != nil {
		if trace != nil {
			trace.close()
		}
		_ = unix.Flock(int(page.f.Fd()), unix.LOCK_UN)
		return nil, err
	}
	atomic.StoreUint64(page.u64(offMagic), 0)
	atomic.StoreUint64(page.u64(offPID), uint64(os.Getpid()))
	atomic.StoreUint64(page.u64(offWatermark), 0)
	atomic.StoreUint64(page.u64(offLost), 0)
	var flags uint64
	if trace != nil {
		flags |= flagCloneTrace
	}
	atomic.StoreUint64(page.u64(offFlags), flags)
	since := e.now()
	atomic.StoreUint64(page.u64(offWatchSince), since)
	atomic.StoreUint64(page.u64(offMagic), listenerMagic)
	l := &listener{e: e, conn: conn, page: page, done: make(chan struct{}), lastSweep: time.Now(),
		trace: trace, traceWhy: traceWhy, published: make(chan struct{})}
	go l.run()
	// Tasks born in the subscription's own tick may predate it; make every task the caller
	// creates from now on count as watched.
	waitNextTick(e.now, since)
	return l, nil
}

func pageWritable(p *listenerPage) bool {
	fl, err := unix.FcntlInt(p.f.Fd(), unix.F_GETFL, 0)
	return err == nil && fl&unix.O_ACCMODE == unix.O_RDWR
}

func (l *listener) stop() {
	atomic.StoreUint64(l.page.u64(offMagic), 0)
	atomic.StoreUint64(l.page.u64(offFlags), 0)
	_ = l.conn.Close()
	<-l.done
	if l.trace != nil {
		if err := l.trace.close(); err != nil {
			l.noteError(err)
		}
	}
	_ = unix.Flock(int(l.page.f.Fd()), unix.LOCK_UN)
	futexWake(l.page.u32(offSeq))
}

func (l *listener) run() {
	defer close(l.done)
	for {
		events, err := l.conn.Read(l.publish)
		if err != nil {
			return
		}
		for _, ev := range events {
			if err := l.handle(ev); err != nil {
				l.noteError(err)
			}
		}
		if l.trace != nil {
			// Keep the instance's ring buffer from overflowing between lookups.
			if err := l.trace.drain(); err != nil {
				l.noteError(err)
			}
		}
		if time.Since(l.lastSweep) > sweepEvery {
			l.lastSweep = time.Now()
			_ = l.e.sweep()
		}
	}
}

func (l *listener) noteError(err error) {
	l.mu.Lock()
	l.lastErr, l.errors = err, l.errors+1
	l.mu.Unlock()
}

// publish is called whenever the socket is found empty: every event queued before now
// has been handled.
func (l *listener) publish(now int64) {
	atomic.StoreUint64(l.page.u64(offWatermark), uint64(now))
	atomic.AddUint32(l.page.u32(offSeq), 1)
	futexWake(l.page.u32(offSeq))
	l.pubMu.Lock()
	close(l.published)
	l.published = make(chan struct{})
	l.pubMu.Unlock()
}

func (l *listener) handle(ev numa.ProcEvent) error {
	switch ev.Kind {
	case numa.ProcEventLost:
		// Births were missed: nothing born before now can be vouched for.
		atomic.AddUint64(l.page.u64(offLost), 1)
		atomic.StoreUint64(l.page.u64(offWatchSince), l.e.now())
	case numa.ProcEventFork:
		if forcedAt, err := l.e.firstForcedAt(); err != nil || forcedAt == 0 {
			return err // nothing was ever forced: every task holds the default
		}
		if ev.ChildTID != ev.ChildTGID {
			return l.threadBorn(ev)
		}
		return l.processBorn(ev)
	case numa.ProcEventExec:
		return l.execed(ev)
	case numa.ProcEventExit:
		if ev.ChildTID != ev.ChildTGID && l.e.store.hasGroup(ev.ChildTGID) {
			return l.e.store.withLock(func() error { return l.e.store.removeEntry(ev.ChildTGID, ev.ChildTID) })
		}
		// A group leader's entry stays: the leader may live on as a zombie, or be replaced
		// by an exec from another thread. Lookups and sweeps drop it once it is stale.
	}
	return nil
}

// value is what the emulator holds for a live task: its entry, or the default.
func (l *listener) value(tgid int, t numa.Task) taskEntry {
	if e, ok, err := l.e.store.readEntry(tgid, t.TID); err == nil && ok && e.Start == t.StartTime {
		return e
	}
	return defaultEntry(tgid, t)
}

// threadBorn handles a new thread. The fork event names the group's parent, not the thread
// that called clone(); the trace, when there is one, names it, and the new thread inherits
// its value. Without the trace, the creator is one of the group's older threads: if they all
// hold the same value the new thread inherits it; otherwise the creator is unknown.
func (l *listener) threadBorn(ev numa.ProcEvent) error {
	if !l.e.store.hasGroup(ev.ChildTGID) {
		return nil // no thread of the group has an entry: all hold the default
	}
	child, err := numa.ReadTask(l.e.procRoot, ev.ChildTID)
	if err != nil {
		return nil // already gone
	}
	if b, ok := l.traced(ev, true); ok && b.Creator != 0 {
		if from, ok := l.creatorValue(ev.ChildTGID, b.Creator, child); ok {
			return l.e.inherit(ev.ChildTGID, child, from)
		}
	}
	names, err := readDirNames(filepath.Join(l.e.procRoot, strconv.Itoa(ev.ChildTGID), "task"))
	if err != nil {
		return nil
	}
	var values []taskEntry
	for _, name := range names {
		tid, err := strconv.Atoi(name)
		if err != nil || tid == child.TID {
			continue
		}
		t, err := numa.ReadTask(l.e.procRoot, tid)
		if err != nil {
			continue
		}
		// Threads born after the child cannot have made it (tids grow within a tick).
		if t.StartTime > child.StartTime || (t.StartTime == child.StartTime && tid > child.TID) {
			continue
		}
		values = append(values, l.value(ev.ChildTGID, t))
	}
	if len(values) == 0 || !sameValues(values) {
		return l.e.assumeFresh(ev.ChildTGID, child)
	}
	return l.e.inherit(ev.ChildTGID, child, values[0])
}

// traced returns the task_newtask event of a fork event, if the trace has it. It waits for
// an event not read yet only if wait.
func (l *listener) traced(ev numa.ProcEvent, wait bool) (traceBirth, bool) {
	if l.trace == nil {
		return traceBirth{}, false
	}
	d := time.Duration(0)
	if wait {
		d = traceWait
	}
	b, answer, err := l.trace.lookup(ev.ChildTID, ev.TimestampNs, d)
	if err != nil {
		l.noteError(err)
	}
	return b, answer == birthFound
}

// creatorValue returns the value that thread creator of group tgid held when it made child:
// its entry (or the default) if it still lives, its entry if it has ended since (a thread's
// entry goes with its exit event, which comes after this fork event).
func (l *listener) creatorValue(tgid, creator int, child numa.Task) (taskEntry, bool) {
	if t, err := numa.ReadTask(l.e.procRoot, creator); err == nil {
		if t.StartTime > child.StartTime {
			return taskEntry{}, false // the creator's tid is another task's now
		}
		return l.value(tgid, t), true
	}
	ent, ok, err := l.e.store.readEntry(tgid, creator)
	if err != nil || !ok || ent.Start > child.StartTime {
		return taskEntry{}, false
	}
	return ent, true
}

// processBorn handles a new process. ParentTID is the thread that called clone() (unless
// CLONE_PARENT made the caller's parent the child's). A fork() child (no CLONE_VM) starts at
// -1; a CLONE_VM child (vfork, posix_spawn) keeps its creator's value, across exec. The
// trace's task_newtask event, when there is one, carries the clone flags and the creator.
// Without it, kcmp(KCMP_VM) tells the two apart while the child still shares the parent's
// memory; afterwards an unchanged memory layout still shows a fork() child that has not
// exec'ed. Anything else is unknown.
func (l *listener) processBorn(ev numa.ProcEvent) error {
	parentEntry, ok, err := l.e.store.readEntry(ev.ParentTGID, ev.ParentTID)
	if err != nil {
		return err
	}
	forced := ok && !parentEntry.isDefault()
	b, traced := l.traced(ev, forced)
	if traced && b.Creator != 0 && b.Creator != ev.ParentTID {
		return l.bornOfCreator(ev, b) // CLONE_PARENT
	}
	if !forced {
		return nil // the parent holds the default, and so does the child either way
	}
	child, err := numa.ReadTask(l.e.procRoot, ev.ChildTID)
	if err != nil {
		return nil
	}
	parent, err := numa.ReadTask(l.e.procRoot, ev.ParentTID)
	if err != nil || parent.StartTime != parentEntry.Start {
		if err == nil {
			return nil // a stale entry: the parent holds the default
		}
		return l.e.assumeFresh(ev.ChildTGID, child) // the parent is gone: cannot compare
	}
	if traced {
		if b.Flags&cloneVM == 0 {
			return nil // a fork() child: the default, which needs no entry
		}
		return l.e.inherit(ev.ChildTGID, child, parentEntry)
	}
	same, err := kcmp(ev.ParentTID, ev.ChildTID, kcmpVM)
	if errors.Is(err, unix.ESRCH) {
		if _, gone := numa.ReadTask(l.e.procRoot, ev.ChildTID); gone != nil {
			return nil
		}
	}
	if err == nil && same == 0 {
		return l.e.inherit(ev.ChildTGID, child, parentEntry)
	}
	if err == nil && l.forkCopy(ev.ParentTID, ev.ChildTID) {
		return nil // a fork() child: the default, which needs no entry
	}
	return l.e.assumeFresh(ev.ChildTGID, child)
}

// bornOfCreator handles a new process whose creator the trace names and the fork event
// does not (CLONE_PARENT).
func (l *listener) bornOfCreator(ev numa.ProcEvent, b traceBirth) error {
	if b.Flags&cloneVM == 0 {
		return nil // a fork() child
	}
	child, err := numa.ReadTask(l.e.procRoot, ev.ChildTID)
	if err != nil {
		return nil
	}
	data, err := numa.ReadTaskFile(l.e.procRoot, b.Creator, "status")
	if err != nil {
		return l.e.assumeFresh(ev.ChildTGID, child)
	}
	st, err := parseStatus(string(data))
	if err != nil {
		return l.e.assumeFresh(ev.ChildTGID, child)
	}
	from, ok := l.creatorValue(st.TGID, b.Creator, child)
	if !ok {
		return l.e.assumeFresh(ev.ChildTGID, child)
	}
	return l.e.inherit(ev.ChildTGID, child, from)
}

// forkCopy reports whether the child still has its parent's memory layout in a separate
// address space, which only fork() gives: exec with randomization moves the stack and brk.
func (l *listener) forkCopy(parentTID, childTID int) bool {
	if data, err := os.ReadFile(filepath.Join(l.e.procRoot, "sys", "kernel", "randomize_va_space")); err != nil || string(data) == "0\n" {
		return false
	}
	data, err := os.ReadFile(filepath.Join(l.e.procRoot, strconv.Itoa(childTID), "personality"))
	if err != nil {
		return false
	}
	if v, err := strconv.ParseUint(strings.TrimSpace(string(data)), 16, 32); err != nil || v&addrNoRandomize != 0 {
		return false
	}
	layout := func(tid int) (memLayout, bool) {
		data, err := os.ReadFile(filepath.Join(l.e.procRoot, strconv.Itoa(tid), "stat"))
		if err != nil {
			return memLayout{}, false
		}
		m, ok, err := parseStatLayout(string(data))
		return m, ok && err == nil
	}
	pl, okP := layout(parentTID)
	cl, okC := layout(childTID)
	return okP && okC && pl == cl
}

// execed handles an exec. The task at tgid keeps its value across exec; but when another
// thread of the group execs, it takes over the leader's pid (and start time) while the
// other threads die. If the group's threads held different values, which one lives on is
// unknown.
func (l *listener) execed(ev numa.ProcEvent) error {
	tgid := ev.ChildTGID
	if !l.e.store.hasGroup(tgid) {
		return nil
	}
	leader, err := numa.ReadTask(l.e.procRoot, tgid)
	if err != nil {
		return nil
	}
	entries, err := l.e.store.groupEntries(tgid)
	if err != nil {
		return err
	}
	// An entry that started before the leader is another process's: the group's pid was
	// recycled and that thread's exit event was lost, or its entry was written after it.
	values := []taskEntry{l.value(tgid, leader)}
	for _, e := range entries {
		if e.TID != tgid && e.Start >= leader.StartTime {
			values = append(values, e)
		}
	}
	if len(values) == 1 {
		return nil // single-threaded: nothing moves
	}
	return l.e.store.withLock(func() error {
		for _, e := range entries {
			if e.TID != tgid {
				if err := l.e.store.removeEntry(tgid, e.TID); err != nil {
					return err
				}
			}
		}
		if !sameValues(values) {
			return l.e.assumeFreshLocked(tgid, leader, true)
		}
		v := values[0]
		if v.isDefault() {
			return l.e.store.removeEntry(tgid, tgid)
		}
		v.TID, v.TGID, v.Start = tgid, tgid, leader.StartTime
		return l.e.store.writeEntry(v)
	})
}

func sameValues(values []taskEntry) bool {
	for _, v := range values[1:] {
		if v.Force != values[0].Force || v.Preferred != values[0].Preferred {
			return false
		}
	}
	return true
}
