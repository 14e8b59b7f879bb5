// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package nodeagent

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/internal/cpuset"
	"github.com/numapref/numapref/internal/nodeagent/cgroups"
	"github.com/numapref/numapref/internal/nodeagent/desire"
	"github.com/numapref/numapref/internal/nodeagent/ledger"
	"github.com/numapref/numapref/internal/nodeagent/plan"
	"github.com/numapref/numapref/internal/numa"
)

// fakeNode is a node of fake containers, each a fakeHost (by container ID) under one
// /proc: its resolver and kernel pass each call to the container it names.
type fakeNode struct {
	t          *testing.T
	containers map[string]*fakeHost
	mu         sync.Mutex
	identified []int // the tasks a pidfd was asked for
}

func newFakeNode(t *testing.T, ids ...string) *fakeNode {
	n := &fakeNode{t: t, containers: map[string]*fakeHost{}}
	proc := t.TempDir()
	for _, id := range ids {
		h := newFakeHost(t)
		h.proc = proc
		n.containers[id] = h
	}
	return n
}

// desire is the desire for NUMA node 1 of container id, of a pod of its own.
func (n *fakeNode) desire(id string) desire.Desire {
	return desire.Desire{Pod: types.NamespacedName{Namespace: "ns", Name: id}, PodUID: types.UID(id), Container: "main", Node: 1,
		Ref: cgroups.ContainerRef{PodUID: id, ContainerID: "containerd://" + id}}
}

func (n *fakeNode) engine(cfg EngineConfig) *Engine {
	n.t.Helper()
	cfg.Resolver, cfg.Kernel, cfg.ProcRoot = n, n, n.any().proc
	cfg.Support = numa.Support{Supported: true, Backend: "fake"}
	cfg.OnlineNodes = []int{0, 1}
	cfg.LedgerPath = filepath.Join(n.t.TempDir(), "ledger.json")
	cfg.handles = func(tid, tgid int) (plan.TaskHandle, error) {
		n.mu.Lock()
		n.identified = append(n.identified, tid)
		n.mu.Unlock()
		return noPIDFDs(tid, tgid)
	}
	e, err := NewEngine(cfg)
	if err != nil {
		n.t.Fatal(err)
	}
	return e
}

func (n *fakeNode) any() *fakeHost {
	for _, h := range n.containers {
		return h
	}
	return nil
}

func (n *fakeNode) of(c *cgroups.Container) *fakeHost {
	return n.containers[strings.TrimPrefix(c.Ref.ContainerID, "containerd://")]
}

// holding returns the container whose kernel state has tid (the first one if none).
func (n *fakeNode) holding(tid int) *fakeHost {
	for _, h := range n.containers {
		if _, ok := h.snapshot()[tid]; ok {
			return h
		}
	}
	return n.any()
}

func (n *fakeNode) Resolve(ref cgroups.ContainerRef) (*cgroups.Container, error) {
	return &cgroups.Container{Ref: ref, Path: "/fake/" + ref.ContainerID}, nil
}
func (n *fakeNode) ListTIDs(c *cgroups.Container) ([]cgroups.TaskRef, error) {
	return n.of(c).ListTIDs(c)
}
func (n *fakeNode) ThreadIDs(c *cgroups.Container) ([]int, error) { return n.of(c).ThreadIDs(c) }
func (n *fakeNode) Cpuset(c *cgroups.Container) (cpuset.Cpuset, error) {
	return n.of(c).Cpuset(c)
}
func (n *fakeNode) Get(tid int) (int, error) { return n.holding(tid).Get(tid) }
func (n *fakeNode) Set(tid, node int) error  { return n.holding(tid).Set(tid, node) }
func (n *fakeNode) wasIdentified(tid int) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Contains(n.identified, tid)
}

// A container with more tasks than its share gets TooManyTasks and alone stops being
// placed: none of its tasks is identified (no pidfd) or set, and it has no ledger entry;
// what was set in it while it was within its share is undone. The other container of the
// node is placed all along.
func TestTooManyTasksRefusesOnlyThatContainer(t *testing.T) {
	n := newFakeNode(t, "small", "big")
	small, big := n.containers["small"], n.containers["big"]
	small.addTask(100, -1)
	small.addTask(101, -1)
	for tid := 200; tid < 205; tid++ {
		big.addTask(tid, -1)
	}
	e := n.engine(EngineConfig{MaxTasksPerContainer: 4})
	e.SetDesired([]desire.Desire{n.desire("small"), n.desire("big")})
	e.Pass()
	wantReasons(t, e, n, map[string]string{"small": numav1.ReasonApplied, "big": numav1.ReasonTooManyTasks})
	r := e.Results()[n.desire("big").Key()]
	if !strings.Contains(r.Message, "more than the 4 tasks") || !strings.Contains(r.Message, "--max-tasks-per-container") || r.SkippedTasks != 5 {
		t.Errorf("big's result: %q (skipped %d), want the share, its flag and 5 skipped tasks", r.Message, r.SkippedTasks)
	}
	// One more thread is no change of the node's results (no report or Event churn).
	before := e.Results()
	big.addTask(205, -1)
	e.Pass()
	if !resultEqual(before[r.Desire.Key()], e.Results()[r.Desire.Key()]) {
		t.Errorf("a new thread of a container past its share changed its result: %+v -> %+v", before[r.Desire.Key()], e.Results()[r.Desire.Key()])
	}
	big.moveOut(205)
	for tid := 200; tid < 205; tid++ {
		if n.wasIdentified(tid) {
			t.Errorf("task %d of big was identified: a container past its share must hold no pidfd", tid)
		}
	}
	wantPlaced(t, n, e, map[string][]int{"small": {100, 101}})

	// Back at its share, big is placed.
	big.moveOut(204)
	e.Pass()
	wantReasons(t, e, n, map[string]string{"small": numav1.ReasonApplied, "big": numav1.ReasonApplied})
	wantPlaced(t, n, e, map[string][]int{"small": {100, 101}, "big": {200, 201, 202, 203}})

	// Past it again: refused and undone, while a new task of small is placed.
	big.addTask(204, -1)
	small.addTask(102, -1)
	e.Pass()
	wantReasons(t, e, n, map[string]string{"small": numav1.ReasonApplied, "big": numav1.ReasonTooManyTasks})
	wantPlaced(t, n, e, map[string][]int{"small": {100, 101, 102}})
}

// wantPlaced checks that the node's tasks on NUMA node 1, and the ledger's containers and
// tasks, are exactly placed's (by container ID).
func wantPlaced(t *testing.T, n *fakeNode, e *Engine, placed map[string][]int) {
	t.Helper()
	l, err := readLedger(e.cfg.LedgerPath)
	if err != nil {
		t.Fatal(err)
	}
	for id, h := range n.containers {
		var on1 []int
		for tid, v := range h.snapshot() {
			if v == 1 {
				on1 = append(on1, tid)
			}
		}
		var recorded []int
		if entry := l[n.desire(id).Key()]; entry != nil {
			recorded = slices.Collect(maps.Keys(entry.Tasks))
		}
		if !sameSet(on1, placed[id]) || !sameSet(recorded, placed[id]) {
			t.Errorf("container %s: tasks %v on node 1, %v in the ledger; want %v", id, on1, recorded, placed[id])
		}
	}
}

func wantReasons(t *testing.T, e *Engine, n *fakeNode, want map[string]string) {
	t.Helper()
	got := map[string]string{}
	for id := range want {
		got[id] = e.Results()[n.desire(id).Key()].Reason
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("reasons %v, want %v", got, want)
	}
}

func TestTaskShare(t *testing.T) {
	for name, tc := range map[string]struct {
		share, ledgerLimit, want int
	}{
		"default":                 {share: 0, ledgerLimit: ledger.DefaultLimit, want: DefaultMaxTasksPerContainer},
		"flag":                    {share: 8, ledgerLimit: ledger.DefaultLimit, want: 8},
		"never past the ledger":   {share: 1 << 30, ledgerLimit: ledger.DefaultLimit, want: ledger.TaskCapacity(ledger.DefaultLimit)},
		"a tiny ledger holds one": {share: 8, ledgerLimit: 10, want: 1},
	} {
		t.Run(name, func(t *testing.T) {
			if got := taskShare(tc.share, tc.ledgerLimit); got != tc.want {
				t.Errorf("taskShare(%d, %d) = %d, want %d", tc.share, tc.ledgerLimit, got, tc.want)
			}
		})
	}
}
