package nodeagent

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/numapref/numapref/internal/nodeagent/cgroups"
	"github.com/numapref/numapref/internal/numa"
)

// fakeHost is one container of fake tasks: a resolver listing them, a /proc with their
// start times, and a kernel holding their values. onGet runs before every GET.
type fakeHost struct {
	t      *testing.T
	proc   string
	tids   []int
	values map[int]int
	onGet  func(tid int)
}

func (h *fakeHost) addTask(tid, value int) {
	h.t.Helper()
	stat := fmt.Sprintf("%d (task) S 1 %d %d 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 %d 0 0\n", tid, tid, tid, 1000+tid)
	writeFile(h.t, filepath.Join(h.proc, fmt.Sprint(tid), "stat"), stat)
	h.tids = append(h.tids, tid)
	h.values[tid] = value
}

func (h *fakeHost) Resolve(ref cgroups.ContainerRef) (*cgroups.Container, error) {
	return &cgroups.Container{Ref: ref, Path: "/fake"}, nil
}
func (h *fakeHost) ListTIDs(*cgroups.Container) ([]cgroups.TaskRef, error) {
	var out []cgroups.TaskRef
	for _, tid := range h.tids {
		out = append(out, cgroups.TaskRef{TGID: h.tids[0], TID: tid})
	}
	return out, nil
}
func (h *fakeHost) Cpuset(*cgroups.Container) (cgroups.Cpuset, error) {
	return cgroups.Cpuset{Mems: []int{0, 1}}, nil
}
func (h *fakeHost) ProcRoot() string { return h.proc }
func (h *fakeHost) Get(tid int) (int, error) {
	if h.onGet != nil {
		h.onGet(tid)
	}
	v, ok := h.values[tid]
	if !ok {
		return 0, unix.ESRCH
	}
	return v, nil
}
func (h *fakeHost) Set(tid, nid int) error {
	if _, ok := h.values[tid]; !ok {
		return unix.ESRCH
	}
	h.values[tid] = nid
	return nil
}

// TestEngineUndoRacesThreadCreation: undo restores tasks one by one; a thread created
// meanwhile by a task that still holds the agent's value inherits it (threads and CLONE_VM
// children copy their creator's numa_preferred_nid_force). Undo lists again after
// restoring, so that thread is restored too instead of keeping the node for ever. (This
// failed before undo re-listed: the entry was deleted after one listing.)
func TestEngineUndoRacesThreadCreation(t *testing.T) {
	h := &fakeHost{t: t, proc: t.TempDir(), values: map[int]int{}}
	h.addTask(100, -1)
	h.addTask(101, -1)
	d := Desire{PodUID: "pod", Container: "main", Ref: cgroups.ContainerRef{PodUID: "pod", ContainerID: "containerd://x"}, Node: 1}
	e, err := NewEngine(EngineConfig{Resolver: h, Kernel: h, Support: numa.Support{Supported: true, Backend: "fake"},
		OnlineNodes: []int{0, 1}, LedgerPath: filepath.Join(t.TempDir(), "ledger.json")})
	if err != nil {
		t.Fatal(err)
	}
	e.SetDesired([]Desire{d})
	e.Pass()
	if h.values[100] != 1 || h.values[101] != 1 {
		t.Fatalf("not applied: %v", h.values)
	}

	// Undo: while the first task is being restored (after the listing), task 101, still
	// at node 1, starts a thread, which inherits node 1.
	h.onGet = func(int) {
		if !slices.Contains(h.tids, 102) {
			h.addTask(102, h.values[101])
		}
	}
	e.SetDesired(nil)
	e.Pass()
	h.onGet = nil
	e.Pass()
	for tid, v := range h.values {
		if v != -1 {
			t.Errorf("after undo, task %d holds node %d, want -1 (values %v)", tid, v, h.values)
		}
	}
}
