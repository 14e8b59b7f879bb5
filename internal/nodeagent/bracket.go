package nodeagent

import (
	"errors"
	"fmt"
	"os"
	"slices"

	"github.com/numapref/numapref/internal/nodeagent/cgroups"
	"github.com/numapref/numapref/internal/numa"
)

// The prctl names its target by id, and an id is given to a new task once its task is
// gone: between listing a container and its SET a task can exit and a stranger take its
// id. So every SET, of a pass and of undo, is bracketed. The task is identified once it is
// listed: a pidfd where the kernel gives one (it can never come to name another task) and
// the start time. Before the SET the container's cgroups are listed again and the task
// must be in them and still be the one identified (its pidfd alive, or the same start
// time); after the SET, the same once more. A SET that fails the check after it may have
// hit another task: it is counted (numapref_task_sets_total{result="raced"}), logged, and
// a pass's SET is put back.
//
// Membership is read from the container's own task files (cgroups.ThreadIDs), not from a
// task's /proc/<tid>/cgroup: that names the cgroup relative to the reader's cgroup
// namespace, and on cgroup v2 the agent's container has its own.

// taskHandle is a handle on one task that never names another: a pidfd.
type taskHandle interface {
	// Alive reports whether the task still runs, and so still holds its id.
	Alive() (bool, error)
	Close() error
}

// pidfdOpener opens a taskHandle on task tid of process tgid. An error wrapping
// numa.ErrTaskGone means the task is gone; any other, that it has no handle (its start
// time then identifies it alone).
type pidfdOpener func(tid, tgid int) (taskHandle, error)

// openPIDFD is the engine's pidfdOpener: numa.OpenPIDFD.
func openPIDFD(tid, tgid int) (taskHandle, error) {
	p, err := numa.OpenPIDFD(tid, tgid)
	if err != nil {
		return nil, err
	}
	return p, nil
}

// heldTask is a task identified for a SET: its id and start time (what the ledger
// records) and, where the kernel gives one, its pidfd.
type heldTask struct {
	numa.Task
	pidfd taskHandle // nil: the start time alone identifies the task
	slot  int        // the pidfd's in its identifier
}

// holds reports whether the task's id still names the task identified: its pidfd is alive
// or, without one, /proc/<tid>/stat shows its start time (to the clock tick).
func (h heldTask) holds(procRoot string) bool {
	if h.pidfd != nil {
		alive, err := h.pidfd.Alive()
		return err == nil && alive
	}
	return h.Verify(procRoot) == nil
}

// pidfdBound bounds the pidfds a pass holds at once, from the soft limit of open files:
// half of it, so that the pass's own reads of /proc and cgroup files never run short.
// Tasks past the bound are identified by start time alone.
func pidfdBound() int {
	lim, err := numa.OpenFilesLimit()
	if err != nil {
		return 0
	}
	return int(min(lim/2, 1<<20))
}

// identifier identifies the tasks of one pass and holds their pidfds, at most max at once,
// until they are released.
type identifier struct {
	procRoot string
	handles  pidfdOpener
	max      int
	// slots are the pidfds opened (heldTask.slot), nil once released; open counts the others.
	slots []taskHandle
	open  int
}

func (e *Engine) newIdentifier() *identifier {
	return &identifier{procRoot: e.cfg.ProcRoot, handles: e.cfg.handles, max: e.maxPIDFDs}
}

// identify identifies listed task ref. Its start time is read after its pidfd is opened
// and confirmed alive after, so it is the pidfd's task's. An error means the task is gone.
func (ids *identifier) identify(ref cgroups.TaskRef) (heldTask, error) {
	var h taskHandle
	slot := -1
	if ids.open < ids.max {
		var err error
		h, err = ids.handles(ref.TID, ref.TGID)
		if errors.Is(err, numa.ErrTaskGone) {
			return heldTask{}, err
		}
		if h != nil {
			slot = len(ids.slots)
			ids.slots = append(ids.slots, h)
			ids.open++
		}
	}
	task, err := numa.ReadTask(ids.procRoot, ref.TID)
	held := heldTask{Task: task, pidfd: h, slot: slot}
	if err == nil && !held.holds(ids.procRoot) {
		err = fmt.Errorf("identifying task %d: %w", ref.TID, numa.ErrTaskGone)
	}
	if err != nil {
		ids.release(held)
		return heldTask{}, err
	}
	return held, nil
}

// release closes the task's pidfd, if it has one.
func (ids *identifier) release(h heldTask) {
	if h.pidfd != nil && ids.slots[h.slot] != nil {
		h.pidfd.Close()
		ids.slots[h.slot] = nil
		ids.open--
	}
}

// releaseAll closes every pidfd still open: the pass is over.
func (ids *identifier) releaseAll() {
	for _, h := range ids.slots {
		if h != nil {
			h.Close()
		}
	}
	ids.slots, ids.open = nil, 0
}

// setBatch brackets the SETs of one container: start lists its cgroups before the first
// SET, confirm after the last. Each task's identity is checked after each listing, so a
// SET confirmed hit the task identified, and that task was in the container before and
// after it.
type setBatch struct {
	e       *Engine
	key     ContainerKey
	cg      *cgroups.Container
	members []int // thread ids listed before the SETs, sorted
	listErr error // why members could not be listed (then no SET is issued)
	issued  []issuedSet
}

// issuedSet is a SET the kernel took, to be confirmed.
type issuedSet struct {
	task   heldTask
	node   int // the value set
	before int // the value read right before
	at     setMark
}

// setState is what became of one SET of a batch.
type setState int

const (
	setIssued  setState = iota // the kernel took it; confirm decides
	setSkipped                 // not issued: the task is gone, left the container, or needs none
	setRefused                 // the kernel refused the GET or the SET
)

// startSets lists key's cgroups cg for the SETs to come. Tasks of a container whose
// listing fails are skipped.
func (e *Engine) startSets(key ContainerKey, cg *cgroups.Container) *setBatch {
	b := &setBatch{e: e, key: key, cg: cg}
	tids, err := e.cfg.Resolver.ThreadIDs(cg)
	if err != nil {
		e.cfg.Log.V(2).Info("Listing the container before its SETs failed; none is issued", "container", key.String(), "error", err.Error())
		b.listErr = err
		return b
	}
	b.members = tids
	return b
}

// set issues SET(task, node) if task is still in the container and still the task
// identified. want, when not nil, decides from the task's current value whether the SET
// is needed at all. An error comes with setRefused.
func (b *setBatch) set(task heldTask, node int, want func(before int) bool) (setState, error) {
	e := b.e
	if _, in := slices.BinarySearch(b.members, task.TID); !in {
		return setSkipped, nil
	}
	before, err := e.cfg.Kernel.Get(task.TID)
	switch {
	case numa.IsTaskGone(err):
		return setSkipped, nil
	case err != nil:
		return setRefused, fmt.Errorf("reading preferred node of task %d: %w", task.TID, err)
	case want != nil && !want(before):
		return setSkipped, nil
	case !task.holds(e.cfg.ProcRoot): // after the listing and the GET: both were of this task
		return setSkipped, nil
	}
	if e.cfg.hooks.beforeSet != nil {
		e.cfg.hooks.beforeSet(task.TID)
	}
	err = e.cfg.Kernel.Set(task.TID, node)
	switch {
	case numa.IsTaskGone(err):
		return setSkipped, nil
	case err != nil:
		return setRefused, fmt.Errorf("setting preferred node %d of task %d: %w", node, task.TID, err)
	}
	b.issued = append(b.issued, issuedSet{task: task, node: node, before: before, at: e.markSet()})
	return setIssued, nil
}

// confirm lists the container again and returns the issued SETs whose task is still in
// it and still the one identified, and the others: those raced. Raced ones are counted and
// logged and, with putBack, the task that now has the id gets back the value read before
// the SET, if it holds the one the SET left.
func (b *setBatch) confirm(putBack bool) (confirmed, raced []issuedSet) {
	e := b.e
	if len(b.issued) == 0 {
		return nil, nil
	}
	procRoot := e.cfg.ProcRoot
	tids, err := e.cfg.Resolver.ThreadIDs(b.cg) // unreadable: nothing is confirmed
	for _, s := range b.issued {
		if _, in := slices.BinarySearch(tids, s.task.TID); err == nil && in && s.task.holds(procRoot) {
			confirmed = append(confirmed, s)
			continue
		}
		raced = append(raced, s)
		e.cfg.Metrics.reportSet(resultRaced)
		if !putBack {
			e.cfg.Log.Info("An undo SET raced with its task: the task exited or left its container around it, so the value may have gone to another task; an undo SET is not put back",
				"container", b.key.String(), "tid", s.task.TID, "node", s.node)
			continue
		}
		e.cfg.Log.Info("A SET raced with its task: the task exited or left its container around it, so the value may have gone to another task; putting back the value read before it",
			"container", b.key.String(), "tid", s.task.TID, "node", s.node, "putBack", s.before)
		if err := e.putBack(s); err != nil {
			e.cfg.Log.Error(err, "Putting back a raced SET", "container", b.key.String(), "tid", s.task.TID)
		}
	}
	b.issued = nil
	return confirmed, raced
}

// putBack gives the task that now has raced SET s's id the value read before the SET, if
// it holds the value the SET left: the task identified, when it is still alive (it only
// left the container), or else whichever task took its id.
func (e *Engine) putBack(s issuedSet) error {
	procRoot := e.cfg.ProcRoot
	target := s.task
	if !target.holds(procRoot) {
		task, err := numa.ReadTask(procRoot, s.task.TID)
		if err != nil {
			return nil // gone as well: nothing holds the value
		}
		target = heldTask{Task: task}
	}
	v, err := e.cfg.Kernel.Get(target.TID)
	switch {
	case numa.IsTaskGone(err):
		return nil
	case err != nil:
		return fmt.Errorf("reading preferred node of task %d: %w", target.TID, err)
	case v != s.node:
		return nil // not the value the SET left: another SET since, or never this task's
	}
	if err := e.cfg.Kernel.Set(target.TID, s.before); err != nil && !numa.IsTaskGone(err) {
		return fmt.Errorf("putting back preferred node %d of task %d: %w", s.before, target.TID, err)
	}
	if !target.holds(procRoot) {
		return fmt.Errorf("task %d changed again while its value was put back", target.TID)
	}
	return nil
}

// resultRaced is the result of a SET that failed its check after the call.
const resultRaced = "raced"

// engineHooks are test seams: functions a pass calls at fixed points, so a test can force
// a race into a window. Nil ones are not called.
type engineHooks struct {
	// afterWriteAhead runs after a pass's write-ahead ledger write, before its first SET.
	afterWriteAhead func()
	// beforeSet runs right before the kernel SET of tid, after the checks before it.
	beforeSet func(tid int)
	// journalStep runs at the steps of a ledger write: "append" before a record's write
	// to the journal f, "sync" before its fsync, "snapshot" when a compaction's new
	// snapshot is in place and its journal not yet.
	journalStep func(step string, f *os.File, frame []byte)
}
