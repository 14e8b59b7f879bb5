// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package cgroups

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"

	"github.com/numapref/numapref/internal/fsutil"
	"github.com/numapref/numapref/internal/numa"
)

// TaskRef is one task (thread) listed in a container's cgroups: its thread id and the id
// of its thread group (process). A TaskRef is only a listing: the id may be reused as soon
// as the task exits; Identify pins it to a start time.
type TaskRef struct {
	TGID int `json:"tgid"`
	TID  int `json:"tid"`
}

// ListTIDs lists every task of the container: the thread ids in cgroup.threads (v2) or
// tasks (v1) of its cgroup and of every sub-cgroup below it, each with its thread group id,
// sorted by TID. It reads cgroup files; /proc is read only to tell apart the threads of
// several processes sharing one cgroup (one directory listing per such process), never
// /proc/<tid>/stat.
//
// A sub-cgroup that disappears during the walk is skipped: it held no task when it was
// removed. The container's own directory disappearing yields ErrContainerNotFound.
// The list is a snapshot: a task moving between the container's own sub-cgroups while they
// are read may be missed until the next listing, and one moved by a process inside the
// container between reading a cgroup's threads and its processes may be given the wrong
// TGID (the TID is right).
func (r *Resolver) ListTIDs(c *Container) ([]TaskRef, error) {
	w := r.newWalker(false)
	defer putScratch(w.buf)
	if err := w.walkContainer(c); err != nil {
		return nil, fmt.Errorf("listing tasks of %s: %w", c.Path, err)
	}
	tasks, err := w.assign()
	if err != nil {
		return nil, fmt.Errorf("listing tasks of %s: %w", c.Path, err)
	}
	return tasks, nil
}

// ThreadIDs lists the thread ids in c's cgroup and every sub-cgroup below it, sorted: the
// tasks of ListTIDs without their processes, read from the cgroup files alone (no /proc).
// It answers whether a task is in the container now, the same way the listing does: a
// task's own /proc/<tid>/cgroup names its cgroup relative to the reader's cgroup namespace,
// which on cgroup v2 is the agent container's own.
func (r *Resolver) ThreadIDs(c *Container) ([]int, error) {
	w := r.newWalker(true)
	defer putScratch(w.buf)
	if err := w.walkContainer(c); err != nil {
		return nil, fmt.Errorf("listing threads of %s: %w", c.Path, err)
	}
	var tids []int
	for _, g := range w.groups {
		tids = append(tids, g.tids...)
	}
	slices.Sort(tids)
	return slices.Compact(tids), nil
}

// newWalker makes a walker of this host's task files; with threadsOnly it reads no
// cgroup.procs. Its buffer goes back with putScratch.
func (r *Resolver) newWalker(threadsOnly bool) *taskWalker {
	w := &taskWalker{r: r, threadsFile: "tasks", threadsOnly: threadsOnly, buf: getScratch()}
	if r.layout.Version == 2 {
		w.threadsFile = "cgroup.threads"
	}
	return w
}

// walkContainer reads the task files of c's cgroup and its sub-cgroups.
func (w *taskWalker) walkContainer(c *Container) error {
	if err := w.walk(c.TasksDir, true); err != nil {
		return err
	}
	if w.vanished && !dirExists(c.TasksDir) {
		// The sub-cgroups went with the container itself.
		return fmt.Errorf("%s: %w", c.TasksDir, ErrContainerNotFound)
	}
	if w.invisible {
		return fmt.Errorf("%w (run the agent in the host PID namespace)", ErrForeignPIDNamespace)
	}
	return nil
}

// taskGroup is what one cgroup directory lists.
type taskGroup struct {
	tids  []int
	tgids []int // sorted; nil when unknown
	// threaded: cgroup.procs could not be read (EOPNOTSUPP in a v2 threaded cgroup), so
	// the threads' processes are among those of the whole walk.
	threaded bool
}

type taskWalker struct {
	r           *Resolver
	threadsFile string
	threadsOnly bool // read no cgroup.procs: the threads' processes are not wanted
	groups      []taskGroup
	buf         *[]byte
	invisible   bool // a listed id was 0: a task outside the reader's PID namespace
	vanished    bool // a sub-cgroup disappeared during the walk
}

// walk reads dir's task files, then its sub-cgroups'. Threads are read before processes
// so that every listed thread's process is already in the process list read after it
// (unless it exited in between).
func (w *taskWalker) walk(dir string, top bool) error {
	tids, err := w.readIDs(filepath.Join(dir, w.threadsFile))
	if err != nil {
		return w.dirError(dir, top, err)
	}
	g := taskGroup{tids: tids}
	var tgids []int
	if !w.threadsOnly && (len(tids) > 0 || w.r.layout.Version == 2) {
		// On v1 a cgroup without threads has no processes. On v2 a threaded domain with
		// no threads of its own lists the processes of its threaded sub-cgroups.
		tgids, err = w.readIDs(filepath.Join(dir, "cgroup.procs"))
	}
	switch {
	case errors.Is(err, syscall.EOPNOTSUPP):
		g.threaded = true
	case err != nil:
		return w.dirError(dir, top, err)
	default:
		slices.Sort(tgids)
		g.tgids = slices.Compact(tgids)
	}
	if len(g.tids) > 0 || len(g.tgids) > 0 {
		w.groups = append(w.groups, g)
	}
	subdirs, err := readSubdirs(dir, w.buf)
	if err != nil {
		return w.dirError(dir, top, err)
	}
	for _, name := range subdirs {
		sub := filepath.Join(dir, name)
		if w.r.walkHook != nil {
			w.r.walkHook(sub)
		}
		if err := w.walk(sub, false); err != nil {
			return err
		}
	}
	return nil
}

// dirError turns a failure to read dir into the walk's result: a vanished sub-cgroup is
// skipped, a vanished container is ErrContainerNotFound.
func (w *taskWalker) dirError(dir string, top bool, err error) error {
	switch {
	case IsGone(err) && top:
		return fmt.Errorf("%s: %w: %w", dir, ErrContainerNotFound, err)
	case IsGone(err):
		w.vanished = true
		return nil
	default:
		return err
	}
}

// readIDs reads a cgroup.procs, cgroup.threads or tasks file.
func (w *taskWalker) readIDs(path string) ([]int, error) {
	data, err := fsutil.ReadFileInto(path, w.buf)
	if err != nil {
		return nil, err // a *fs.PathError naming the file
	}
	ids, err := parseTaskIDs(data, make([]int, 0, bytes.Count(data, []byte{'\n'})+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if slices.Contains(ids, 0) {
		w.invisible = true
		ids = slices.DeleteFunc(ids, func(id int) bool { return id == 0 })
	}
	return ids, nil
}

// scratch holds read buffers, so listing a container allocates no file buffers.
var scratch = sync.Pool{New: func() any { b := make([]byte, 0, 8192); return &b }}

func getScratch() *[]byte { return scratch.Get().(*[]byte) }

func putScratch(b *[]byte) {
	if cap(*b) <= 1<<20 { // let an unusually large task list go
		scratch.Put(b)
	}
}

// maxTaskID bounds ids accepted from task files; the kernel's PID_MAX_LIMIT is 2^22.
const maxTaskID = math.MaxInt32

// parseTaskIDs parses the content of cgroup.procs, cgroup.threads or tasks: one decimal id
// per line, each line ended by '\n' (the last one may lack it). It appends to dst. 0 is
// accepted: cgroup2 prints it for tasks outside the reader's PID namespace.
func parseTaskIDs(data []byte, dst []int) ([]int, error) {
	for len(data) > 0 {
		line := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		if len(line) == 0 || len(line) > 10 {
			return dst, fmt.Errorf("parsing task ids: bad line %q", line)
		}
		id := 0
		for _, c := range line {
			if c < '0' || c > '9' {
				return dst, fmt.Errorf("parsing task ids: bad line %q", line)
			}
			id = id*10 + int(c-'0')
		}
		if id > maxTaskID {
			return dst, fmt.Errorf("parsing task ids: id %s out of range", line)
		}
		dst = append(dst, id)
	}
	return dst, nil
}

// assign gives every listed thread its thread group id and returns the tasks sorted by
// TID. A thread whose id is a listed process id leads that process. Otherwise its process
// is the only process of its cgroup (or, for a threaded cgroup, of the whole walk), or,
// when there are several, the one whose /proc/<tgid>/task lists it. Threads that exited
// meanwhile are dropped.
func (w *taskWalker) assign() ([]TaskRef, error) {
	var all []int
	n := 0
	for _, g := range w.groups {
		all = append(all, g.tgids...)
		n += len(g.tids)
	}
	slices.Sort(all)
	all = slices.Compact(all)

	tasks := make([]TaskRef, 0, n)
	var lookup *procLookup
	for _, g := range w.groups {
		candidates := g.tgids
		if g.threaded {
			candidates = all
		}
		for _, tid := range g.tids {
			if _, leader := slices.BinarySearch(all, tid); leader {
				tasks = append(tasks, TaskRef{TGID: tid, TID: tid})
				continue
			}
			if len(candidates) == 1 {
				tasks = append(tasks, TaskRef{TGID: candidates[0], TID: tid})
				continue
			}
			if lookup == nil {
				lookup = &procLookup{procRoot: w.r.procRoot, owner: map[int]int{}, read: map[int]bool{}}
			}
			tgid, err := lookup.tgidOf(tid, candidates)
			if err != nil {
				return nil, err
			}
			if tgid > 0 {
				tasks = append(tasks, TaskRef{TGID: tgid, TID: tid})
			}
		}
	}
	slices.SortFunc(tasks, func(a, b TaskRef) int { return a.TID - b.TID })
	// A thread moved between two of the container's cgroups during the walk can be listed
	// twice.
	return slices.CompactFunc(tasks, func(a, b TaskRef) bool { return a.TID == b.TID }), nil
}

// procLookup finds the process of a thread through /proc.
type procLookup struct {
	procRoot string
	owner    map[int]int  // tid -> tgid, from the task directories read so far
	read     map[int]bool // tgids whose task directory was read
}

// tgidOf returns tid's thread group id, or 0 if the thread is gone. It reads the task
// directories of the candidate processes, then, if none lists tid, /proc/<tid>/status.
func (l *procLookup) tgidOf(tid int, candidates []int) (int, error) {
	if tgid, ok := l.owner[tid]; ok {
		return tgid, nil
	}
	for _, tgid := range candidates {
		if l.read[tgid] {
			continue
		}
		l.read[tgid] = true
		tids, err := numa.ListThreads(l.procRoot, tgid)
		if errors.Is(err, numa.ErrTaskGone) {
			continue
		}
		if err != nil {
			return 0, err
		}
		for _, t := range tids {
			l.owner[t] = tgid
		}
		if tgid2, ok := l.owner[tid]; ok {
			return tgid2, nil
		}
	}
	tgid, err := readStatusTgid(l.procRoot, tid)
	if IsGone(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	l.owner[tid] = tgid
	return tgid, nil
}

// readStatusTgid reads the Tgid line of /proc/<tid>/status.
func readStatusTgid(procRoot string, tid int) (int, error) {
	path := filepath.Join(procRoot, strconv.Itoa(tid), "status")
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("reading %s: %w", path, err)
	}
	for line := range bytes.Lines(data) {
		if rest, ok := bytes.CutPrefix(line, []byte("Tgid:")); ok {
			tgid, err := strconv.Atoi(string(bytes.TrimSpace(rest)))
			if err != nil || tgid <= 0 {
				return 0, fmt.Errorf("reading %s: bad Tgid line %q", path, line)
			}
			return tgid, nil
		}
	}
	return 0, fmt.Errorf("reading %s: no Tgid line", path)
}
