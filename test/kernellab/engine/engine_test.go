// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build linux && kernellab

package engine

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/internal/nodeagent"
	"github.com/numapref/numapref/internal/nodeagent/cgroups"
	"github.com/numapref/numapref/internal/nodeagent/desire"
	"github.com/numapref/numapref/internal/numa"
	"github.com/numapref/numapref/internal/numa/prctl"
	"github.com/numapref/numapref/internal/testutil/conformance"
	"github.com/numapref/numapref/internal/testutil/hostlab"
	"github.com/numapref/numapref/internal/testutil/poll"
	"github.com/numapref/numapref/test/kernellab/labenv"
)

// prPreferredNID is the patch's prctl option; on the control kernel a trace witness fails
// the binary if anything issued it.
const prPreferredNID = 78

func TestMain(m *testing.M) {
	runChurnerIfAsked()
	hostlab.RunWorkloadIfAsked()
	os.Exit(conformance.RunWithPrctlWitness(m, prPreferredNID))
}

// lab is a hostlab root on the VM's cgroup2 with a resolver pointed at it.
type lab struct {
	lab      *hostlab.Lab
	resolver *cgroups.Resolver
	online   []int
}

func newLab(t *testing.T) *lab {
	t.Helper()
	topo, err := numa.DiscoverTopology("/sys")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(topo.Online, []int{0, 1}) {
		t.Fatalf("online NUMA nodes %v, want [0 1]", topo.Online)
	}
	l, err := hostlab.New("/sys/fs/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Error(err)
		}
	})
	if l.Version() != 2 {
		t.Fatalf("cgroup v%d, want v2", l.Version())
	}
	r, err := cgroups.NewResolver("/", cgroups.ResolverOptions{Driver: cgroups.DriverCgroupfs, KubeletCgroupRoot: l.KubeletCgroupRoot()})
	if err != nil {
		t.Fatal(err)
	}
	return &lab{lab: l, resolver: r, online: topo.Online}
}

// container makes a burstable container (cpuset.mems set when mems is not empty) running a
// workload with threads extra threads, and the desire asking node for it.
func (l *lab) container(t *testing.T, name, mems string, node, threads int) (*hostlab.Workload, desire.Desire) {
	t.Helper()
	_, w, d := l.containerWith(t, name, mems, node, threads)
	return w, d
}

// containerWith is container that also returns the container's cgroups.
func (l *lab) containerWith(t *testing.T, name, mems string, node, threads int) (*hostlab.Container, *hostlab.Workload, desire.Desire) {
	t.Helper()
	uid := fmt.Sprintf("%x", sha256.Sum256([]byte(t.Name()+name)))
	podUID := uid[:8] + "-" + uid[8:12] + "-" + uid[12:16] + "-" + uid[16:20] + "-" + uid[20:32]
	c, err := l.lab.Container(corev1.PodQOSBurstable, podUID, uid)
	if err != nil {
		t.Fatal(err)
	}
	if mems != "" {
		if err := c.SetMems(mems); err != nil {
			t.Fatal(err)
		}
	}
	w, err := c.StartWorkload(threads)
	if err != nil {
		t.Fatal(err)
	}
	d := desire.Desire{Pod: types.NamespacedName{Namespace: "lab", Name: name}, PodUID: types.UID(podUID), Container: "main",
		Ref: cgroups.ContainerRef{PodUID: podUID, QOS: corev1.PodQOSBurstable, ContainerID: c.ContainerID}, Node: node, Preference: "lab"}
	return c, w, d
}

// state is what the real kernel says of one task: the prctl GET and the force line of
// /proc/<tid>/sched.
type state struct{ get, force int }

func states(t *testing.T, p *prctl.Prctl, pids ...int) map[int]state {
	t.Helper()
	out := map[int]state{}
	for _, pid := range pids {
		tids, err := hostlab.TasksOf(pid)
		if err != nil {
			t.Fatal(err)
		}
		for _, tid := range tids {
			v, err := p.Get(tid)
			if errors.Is(err, unix.ESRCH) {
				continue
			}
			if err != nil {
				t.Fatalf("GET of task %d: %v", tid, err)
			}
			s, err := p.SchedNUMA(tid)
			if err != nil {
				continue // exited since
			}
			if !s.ForcePresent {
				t.Fatalf("/proc/%d/sched has no numa_preferred_nid_force line", tid)
			}
			out[tid] = state{get: v, force: s.PreferredNIDForce}
		}
	}
	return out
}

func all(m map[int]state, node int) bool {
	if len(m) == 0 {
		return false
	}
	for _, s := range m {
		if s.get != node || s.force != node {
			return false
		}
	}
	return true
}

// recorder passes calls to the real prctl and records the SETs that succeeded, so the test
// can tell a value the engine set from one a task inherited.
type recorder struct {
	prctl.Kernel
	mu   sync.Mutex
	sets map[int][]int // tid → nodes set, in order
}

func (r *recorder) Set(tid, nid int) error {
	err := r.Kernel.Set(tid, nid)
	if err == nil {
		r.mu.Lock()
		r.sets[tid] = append(r.sets[tid], nid)
		r.mu.Unlock()
	}
	return err
}

func (r *recorder) setsOf(tid int) []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.sets[tid])
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	poll.True(t, 20*time.Second, what, cond)
}

func TestEngineRealPrctl(t *testing.T) {
	labenv.RequireKernel(t, "patched") // the control boot runs TestEngineKernelUnsupported
	p, sup := prctl.New(prPreferredNID, "/proc")
	if !sup.Supported {
		t.Fatalf("the patched kernel does not prove PR_PREFERRED_NID: %+v", sup)
	}
	l := newLab(t)
	wA, dA := l.container(t, "a", "1", 1, 2) // cpuset.mems=1, desires 1: Applied
	wB, dB := l.container(t, "b", "1", 0, 2) // cpuset.mems=1, desires 0: MemoryPinnedElsewhere
	wC, _ := l.container(t, "c", "", 0, 2)   // not selected: a bystander

	pe, err := numa.OpenProcEvents()
	if err != nil {
		t.Fatalf("opening the proc connector: %v", err)
	}
	defer pe.Close()
	rec := &recorder{Kernel: p, sets: map[int][]int{}}
	e, err := nodeagent.NewEngine(nodeagent.EngineConfig{
		Resolver: l.resolver, Kernel: rec, Support: sup, OnlineNodes: l.online,
		// A 2 s rescan behind the fork events, as the agent runs: in about one full-lab boot
		// in five the engine's fork pass missed the child, whose fork event came before the
		// kernel put it in its cgroup (TestForkEventBeforeCgroup); the rescan still places
		// the child, and the latency test measures the event path.
		LedgerPath: t.TempDir() + "/ledger.json", RescanInterval: 2 * time.Second, ProcEvents: pe.Events(), Log: testr.New(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { _ = e.Start(ctx); close(stopped) }()
	defer func() { cancel(); <-stopped }()

	e.SetDesired([]desire.Desire{dA, dB})
	waitFor(t, "every task of A has node 1", func() bool { return all(states(t, p, wA.Pid()), 1) })
	waitFor(t, "A is Applied", func() bool { return e.Results()[dA.Key()].Reason == numav1.ReasonApplied })
	rA, rB := e.Results()[dA.Key()], e.Results()[dB.Key()]
	t.Logf("A: %s, %d tasks; GET/force per task: %v", rA.Reason, rA.Tasks, states(t, p, wA.Pid()))
	if rB.Reason != numav1.ReasonMemoryPinnedElsewhere {
		t.Errorf("B (cpuset.mems=1, node 0): reason %q, want %s", rB.Reason, numav1.ReasonMemoryPinnedElsewhere)
	}
	t.Logf("B: %s: %s", rB.Reason, rB.Message)
	for name, pid := range map[string]int{"B": wB.Pid(), "C": wC.Pid()} {
		if s := states(t, p, pid); !all(s, -1) {
			t.Errorf("%s: tasks %v, want every GET and force -1", name, s)
		}
	}

	// Threads created later inherit the value in the kernel, at once. Locked goroutines may
	// take idle threads first: asking for more than there are forces new ones.
	before := states(t, p, wA.Pid())
	if err := wA.Threads(len(before) + 1); err != nil {
		t.Fatal(err)
	}
	after := states(t, p, wA.Pid())
	var fresh []int
	for tid, s := range after {
		if _, ok := before[tid]; !ok {
			fresh = append(fresh, tid)
			if s.get != 1 || s.force != 1 {
				t.Errorf("new thread %d: GET %d force %d, want 1 (inherited)", tid, s.get, s.force)
			}
			if sets := rec.setsOf(tid); len(sets) > 0 {
				t.Errorf("new thread %d: the engine set %v, want none (inherited before any pass)", tid, sets)
			}
		}
	}
	if len(fresh) == 0 {
		t.Errorf("no new thread in A (threads before: %v, after: %v)", before, after)
	}
	t.Logf("new threads %v inherited node 1", fresh)

	// A real fork() child starts without the value (the patch resets it); the fork event's
	// pass (or, failing that, the 2 s rescan) brings it in.
	child, err := wA.RawFork()
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the forked child has node 1", func() bool { return all(states(t, p, child), 1) })
	waitFor(t, "the engine counts the child", func() bool {
		return e.Results()[dA.Key()].Tasks == len(states(t, p, wA.Pid(), child))
	})
	// The engine SETs only a task whose GET differs: a SET proves the child started at -1
	// and that the engine, not inheritance, gave it node 1.
	if sets := rec.setsOf(child); !slices.Equal(sets, []int{1}) {
		t.Errorf("forked child %d: the engine set %v, want [1] (fork() resets the value)", child, sets)
	}
	t.Logf("forked child %d: %v, set by the engine (SETs %v); A: %d tasks",
		child, states(t, p, child), rec.setsOf(child), e.Results()[dA.Key()].Tasks)

	// Undo: A deselected, every task (threads and the forked child too) back to -1.
	e.SetDesired(nil)
	e.Pass()
	waitFor(t, "A is back to -1", func() bool { return all(states(t, p, wA.Pid(), child), -1) })
	if len(e.Results()) != 0 {
		t.Errorf("results after undo: %v, want none", e.Results())
	}
	for name, pid := range map[string]int{"B": wB.Pid(), "C": wC.Pid()} {
		if s := states(t, p, pid); !all(s, -1) {
			t.Errorf("%s after undo: tasks %v, want -1", name, s)
		}
	}
	t.Logf("undo: A tasks %v", states(t, p, wA.Pid(), child))
	for _, name := range []string{"B", "C"} {
		pid := map[string]int{"B": wB.Pid(), "C": wC.Pid()}[name]
		for tid := range states(t, p, pid) {
			if sets := rec.setsOf(tid); len(sets) > 0 {
				t.Errorf("%s task %d: the engine set %v, want nothing", name, tid, sets)
			}
		}
	}
}

func TestEngineKernelUnsupported(t *testing.T) {
	labenv.RequireKernel(t, "control")
	p, sup := prctl.New(prPreferredNID, "/proc")
	if sup.Supported {
		t.Fatalf("the control kernel proves PR_PREFERRED_NID: %+v", sup)
	}
	t.Logf("prctl.New: unsupported: %s", sup.Reason)
	l := newLab(t)
	_, dA := l.container(t, "a", "1", 1, 2)
	e, err := nodeagent.NewEngine(nodeagent.EngineConfig{
		Resolver: l.resolver, Kernel: p, Support: sup, OnlineNodes: l.online,
		LedgerPath: t.TempDir() + "/ledger.json", RescanInterval: time.Hour, Log: testr.New(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	e.SetDesired([]desire.Desire{dA})
	e.Pass()
	r := e.Results()[dA.Key()]
	if r.Reason != numav1.ReasonKernelUnsupported {
		t.Errorf("A on the control kernel: reason %q, want %s", r.Reason, numav1.ReasonKernelUnsupported)
	}
	t.Logf("A: %s: %s", r.Reason, r.Message)
	e.SetDesired(nil)
	e.Pass()
}
