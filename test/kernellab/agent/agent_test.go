// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build linux && kernellab

package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/internal/inspect"
	"github.com/numapref/numapref/internal/numa"
	"github.com/numapref/numapref/internal/numa/prctl"
	"github.com/numapref/numapref/internal/testutil/conformance"
	"github.com/numapref/numapref/internal/testutil/hostlab"
	testpoll "github.com/numapref/numapref/internal/testutil/poll"
	"github.com/numapref/numapref/test/kernellab/labenv"
)

// prPreferredNID is the patch's prctl option; on the control kernel a trace witness fails
// the binary if any task issued it, the agent included.
const prPreferredNID = 78

func TestMain(m *testing.M) {
	hostlab.RunWorkloadIfAsked()
	os.Exit(conformance.RunWithPrctlWitness(m, prPreferredNID))
}

// idleWindow is how long the idle cost is measured.
const idleWindow = 60 * time.Second

// TestAgent runs the numapref binary with --kernel=auto as the node agent of a node the test
// makes in the apiserver on the host, with a pod whose cgroup and workload are real, and
// kubectl-applies a NumaPreference. On the patched kernel the agent must place every task
// (the real prctl GET and /proc/<tid>/sched agree), place forked children, report Applied
// through the API, answer /metrics and /inspect, cost little at idle, and undo everything
// when the preference is deleted. On the control kernel it must report KernelUnsupported
// and issue no prctl 78 (TestMain's witness).
func TestAgent(t *testing.T) {
	kernel := labenv.Kernel(t)
	cl := newCluster(t, kernel)
	lab := newHostlab(t)
	p := cl.createPod(t, lab, "lab-a", map[string]string{"app": "lab-a"}, 4, false)
	a := cl.startAgent(t, lab)
	cl.applyPreference(t, "lab-a", map[string]string{"app": "lab-a"}, 1)
	if kernel == "control" {
		checkUnsupported(t, cl, p)
		cl.deletePreference(t, "lab-a")
		return
	}
	backend, support := prctl.New(prPreferredNID, "/proc")
	if !support.Supported {
		t.Fatalf("the patched kernel does not prove the prctl: %s", support.Reason)
	}
	tids := checkApplied(t, cl, p, backend)

	t.Run("forked children placed", func(t *testing.T) {
		child, err := p.workload.RawFork()
		if err != nil {
			t.Fatal(err)
		}
		// A fork() child starts at -1; the agent sets it on the fork event or a rescan.
		start := time.Now()
		poll(t, 10*time.Second, fmt.Sprintf("forked child %d placed", child), func() error { return placed(backend, child, 1) })
		t.Logf("fork() child %d at node 1 after %s", child, time.Since(start).Round(time.Millisecond))
		if err := p.workload.Threads(2); err != nil {
			t.Fatal(err)
		}
		all, err := p.workload.TIDs()
		if err != nil {
			t.Fatal(err)
		}
		poll(t, 10*time.Second, "new threads placed", func() error { return allPlaced(backend, all, 1) })
	})

	t.Run("fork to applied, from the agent's histogram and the workload's side", func(t *testing.T) {
		forkLag(t, cl, p, backend, "forklag")
	})

	t.Run("fork to applied, the floor", func(t *testing.T) {
		forkFloor(t, lab, backend)
	})

	t.Run("metrics and inspect answer", func(t *testing.T) {
		checkMetricsAndInspect(t, cl, p)
	})

	t.Run("idle cost against the bare floor loop", func(t *testing.T) {
		idleCost(t, a, p, backend)
	})

	t.Run("delete undoes everything", func(t *testing.T) {
		all, err := p.workload.TIDs()
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, tids...)
		slices.Sort(all)
		all = slices.Compact(all)
		var live []int
		for _, tid := range all {
			if hostlab.Running(tid) {
				live = append(live, tid)
			}
		}
		live = append(live, childPIDs(p)...)
		cl.deletePreference(t, "lab-a")
		poll(t, 30*time.Second, "every task back at -1", func() error { return allPlaced(backend, live, -1) })
		poll(t, 30*time.Second, "the report without the preference", func() error {
			_, e, err := cl.reportEntry("lab-a")
			if err != nil {
				return err
			}
			if e != nil {
				return fmt.Errorf("report still has %+v", *e)
			}
			return nil
		})
		t.Logf("undo: %d tasks back at -1 (GET and numa_preferred_nid_force)", len(live))
	})
}

// newHostlab makes a hostlab root on the VM's cgroup2.
func newHostlab(t *testing.T) *hostlab.Lab {
	t.Helper()
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
	return l
}

// checkApplied waits for the agent's report and the preference's conditions, then checks
// every task with the real prctl GET and /proc/<tid>/sched. It returns the tasks.
func checkApplied(t *testing.T, cl *cluster, p *labPod, backend *prctl.Prctl) []int {
	t.Helper()
	tids, err := p.workload.TIDs()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	poll(t, apiWait, "the report: lab-a applied to every task", func() error {
		rep, e, err := cl.reportEntry("lab-a")
		switch {
		case err != nil:
			return err
		case e == nil:
			return fmt.Errorf("no entry for lab-a in %+v", rep.Status)
		case len(e.Skipped)+len(e.Failed)+len(e.Ineffective) > 0:
			return fmt.Errorf("problems: %+v", *e)
		case int(e.Tasks) < len(tids) || e.Pods != 1 || e.Containers != 1:
			return fmt.Errorf("entry %+v, want 1 pod, 1 container, at least %d tasks", *e, len(tids))
		case rep.Status.KernelSupport != "prctl":
			return fmt.Errorf("kernelSupport %q, want prctl", rep.Status.KernelSupport)
		}
		return nil
	})
	t.Logf("NumaNodeReport: applied after %s", time.Since(start).Round(time.Millisecond))
	for typ, want := range map[string]string{numav1.ConditionReady: "True", numav1.ConditionDegraded: "False", numav1.ConditionEffective: "True"} {
		poll(t, apiWait, "condition "+typ+"="+want, func() error {
			c, err := cl.condition("lab-a", typ)
			if err != nil {
				return err
			}
			if string(c.Status) != want {
				return fmt.Errorf("%s=%s (%s: %s), want %s", typ, c.Status, c.Reason, c.Message, want)
			}
			return nil
		})
	}
	ready, _ := cl.condition("lab-a", numav1.ConditionReady)
	t.Logf("NumaPreference: Ready=%s reason %s", ready.Status, ready.Reason)
	poll(t, apiWait, "the Applied Event", func() error {
		_, err := cl.podEvent(p.pod, numav1.ReasonApplied)
		return err
	})
	if err := allPlaced(backend, tids, 1); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d tasks: PR_PREFERRED_NID GET 1 and numa_preferred_nid_force 1", len(tids))
	return tids
}

// placed checks one task: the real prctl GET and the kernel's own /proc/<tid>/sched line
// must both say node.
func placed(backend *prctl.Prctl, tid, node int) error {
	got, err := backend.Get(tid)
	if err != nil {
		return fmt.Errorf("GET %d: %w", tid, err)
	}
	s, err := numa.ReadSchedNUMA("/proc", tid)
	if err != nil {
		return err
	}
	if !s.ForcePresent {
		return fmt.Errorf("/proc/%d/sched has no numa_preferred_nid_force", tid)
	}
	if got != node || s.PreferredNIDForce != node {
		return fmt.Errorf("task %d: GET %d, numa_preferred_nid_force %d, want %d", tid, got, s.PreferredNIDForce, node)
	}
	if node >= 0 && s.PreferredNID != node {
		return fmt.Errorf("task %d: numa_preferred_nid %d, want %d (the force sets it)", tid, s.PreferredNID, node)
	}
	return nil
}

func allPlaced(backend *prctl.Prctl, tids []int, node int) error {
	for _, tid := range tids {
		if !hostlab.Running(tid) {
			continue
		}
		if err := placed(backend, tid, node); err != nil {
			return err
		}
	}
	return nil
}

// childPIDs lists the workload's forked children (processes other than the workload in
// its cgroup).
func childPIDs(p *labPod) []int {
	data, _ := os.ReadFile(filepath.Join("/sys/fs/cgroup", cgroupPath(p), "cgroup.procs"))
	var pids []int
	for _, f := range strings.Fields(string(data)) {
		if pid, err := strconv.Atoi(f); err == nil && pid != p.workload.Pid() {
			pids = append(pids, pid)
		}
	}
	return pids
}

func cgroupPath(p *labPod) string { return p.container.Path() }

func checkMetricsAndInspect(t *testing.T, cl *cluster, p *labPod) {
	t.Helper()
	poll(t, 30*time.Second, "the container's series on /metrics", func() error {
		mfs, err := cl.metrics()
		if err != nil {
			return err
		}
		if v, ok := series(mfs, "numapref_kernel_supported", nil); !ok || v != 1 {
			return fmt.Errorf("numapref_kernel_supported = %v (present %v), want 1", v, ok)
		}
		pod := map[string]string{"namespace": workloadNS, "pod": p.pod.Name, "container": "main"}
		for _, f := range []string{"numapref_container_numa_faults", "numapref_container_numa_pages_migrated"} {
			if _, ok := series(mfs, f, pod); !ok {
				return fmt.Errorf("no %s series for the pod", f)
			}
		}
		if v, ok := series(mfs, "numapref_task_sets_total", map[string]string{"result": numav1.ReasonApplied}); !ok || v < 1 {
			return fmt.Errorf("numapref_task_sets_total{result=Applied} = %v, want >= 1", v)
		}
		return nil
	})
	code, body, err := cl.get(inspect.Path(workloadNS, p.pod.Name))
	if err != nil {
		t.Fatal(err)
	}
	if code != http.StatusOK {
		t.Fatalf("/inspect: HTTP %d: %s", code, body)
	}
	var got inspect.Pod
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatalf("/inspect answer: %v\n%s", err, body)
	}
	if got.Kernel.Backend != "prctl" || !got.Kernel.Supported || len(got.Containers) != 1 {
		t.Fatalf("/inspect: kernel %+v, %d containers; want prctl, supported, 1", got.Kernel, len(got.Containers))
	}
	c := got.Containers[0]
	if c.Reason != numav1.ReasonApplied || len(c.Tasks) == 0 {
		t.Fatalf("/inspect: container reason %q with %d tasks, want Applied with tasks", c.Reason, len(c.Tasks))
	}
	for _, task := range c.Tasks {
		if task.Forced == nil || *task.Forced != 1 || task.Effective == nil || *task.Effective != 1 {
			t.Errorf("/inspect task %d: forced %v effective %v, want 1 and 1", task.TID, deref(task.Forced), deref(task.Effective))
		}
	}
	t.Logf("/metrics: kernel supported, container series present; /inspect: %d tasks forced and effective at node 1", len(c.Tasks))
}

func deref(p *int) string {
	if p == nil {
		return "null"
	}
	return strconv.Itoa(*p)
}

// idleCost measures the agent's CPU time over idleWindow once everything is placed, and,
// in the same window and boot, the CPU time of the bare floor loop over the same tasks at
// the agent's rescan interval: list the container's cgroup.procs and cgroup.threads, list
// /proc/<pid>/task of each process, GET each task; nothing else. It prints one line for
// lab.sh:
//
//	idlecost window_s=60 rescan_s=2 tasks=N agent_cpu_s=… floor_cpu_s=… ratio=…
func idleCost(t *testing.T, a *agent, p *labPod, backend *prctl.Prctl) {
	dir := filepath.Join("/sys/fs/cgroup", cgroupPath(p))
	before, err := cpuSeconds(a.pid())
	if err != nil {
		t.Fatal(err)
	}
	type floorResult struct {
		cpu   float64
		tasks int
		err   error
	}
	done := make(chan floorResult, 1)
	go func() {
		// One locked thread, so RUSAGE_THREAD measures exactly the loop.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		var r floorResult
		start := hostlab.ThreadCPU()
		for deadline := time.Now().Add(idleWindow); time.Now().Before(deadline); time.Sleep(rescanInterval) {
			n, err := floorPass(dir, backend)
			if err != nil {
				r.err = err
				break
			}
			r.tasks = n
		}
		r.cpu = hostlab.ThreadCPU() - start
		done <- r
	}()
	r := <-done
	after, err := cpuSeconds(a.pid())
	if err != nil {
		t.Fatal(err)
	}
	if r.err != nil {
		t.Fatal(r.err)
	}
	agentCPU := after - before
	ratio := "inf"
	if r.cpu > 0 {
		ratio = fmt.Sprintf("%.1f", agentCPU/r.cpu)
	}
	fmt.Printf("idlecost window_s=%.0f rescan_s=%.0f tasks=%d agent_cpu_s=%.2f agent_core_pct=%.2f floor_cpu_s=%.3f ratio=%s\n",
		idleWindow.Seconds(), rescanInterval.Seconds(), r.tasks, agentCPU, 100*agentCPU/idleWindow.Seconds(), r.cpu, ratio)
}

// floorPass is one pass of the bare floor loop; it returns the tasks it read.
func floorPass(dir string, backend *prctl.Prctl) (int, error) {
	return hostlab.FloorPass(dir, "cgroup.threads", func(_, tid int) error {
		_, err := backend.Get(tid)
		return err
	})
}

// checkUnsupported: on the control kernel the agent says KernelUnsupported in its report,
// in the preference's conditions and in an Event on the pod, and calls nothing (the witness
// in TestMain checks the kernel trace).
func checkUnsupported(t *testing.T, cl *cluster, p *labPod) {
	t.Helper()
	poll(t, apiWait, "the report: KernelUnsupported", func() error {
		rep, e, err := cl.reportEntry("lab-a")
		switch {
		case err != nil:
			return err
		case rep.Status.KernelSupport != "unsupported":
			return fmt.Errorf("kernelSupport %q, want unsupported", rep.Status.KernelSupport)
		case e == nil:
			return fmt.Errorf("no entry for lab-a in %+v", rep.Status)
		case !hasReason(e.Skipped, numav1.ReasonKernelUnsupported) && !hasReason(e.Failed, numav1.ReasonKernelUnsupported):
			return fmt.Errorf("entry %+v has no KernelUnsupported", *e)
		}
		return nil
	})
	poll(t, apiWait, "Ready=False and Degraded=True for KernelUnsupported", func() error {
		for typ, want := range map[string]string{numav1.ConditionReady: "False", numav1.ConditionDegraded: "True"} {
			c, err := cl.condition("lab-a", typ)
			if err != nil {
				return err
			}
			if string(c.Status) != want || !strings.Contains(c.Reason+c.Message, numav1.ReasonKernelUnsupported) {
				return fmt.Errorf("%s=%s (%s: %s), want %s naming %s", typ, c.Status, c.Reason, c.Message, want, numav1.ReasonKernelUnsupported)
			}
		}
		return nil
	})
	poll(t, apiWait, "the KernelUnsupported Event", func() error {
		_, err := cl.podEvent(p.pod, numav1.ReasonKernelUnsupported)
		return err
	})
	tids, err := p.workload.TIDs()
	if err != nil {
		t.Fatal(err)
	}
	for _, tid := range tids {
		s, err := numa.ReadSchedNUMA("/proc", tid)
		if err != nil {
			t.Fatal(err)
		}
		if s.ForcePresent {
			t.Fatalf("/proc/%d/sched has numa_preferred_nid_force on the control kernel", tid)
		}
	}
	t.Logf("control: report, conditions and Event say KernelUnsupported; %d tasks untouched", len(tids))
}

func hasReason(list []numav1.ReasonCount, reason string) bool {
	return slices.ContainsFunc(list, func(c numav1.ReasonCount) bool { return c.Reason == reason })
}

// forkLagSamples is how many forks forkLag measures.
const forkLagSamples = 50

// forkLag forks forkLagSamples children of the workload one at a time and waits until each
// is placed, reading the agent's own numapref_fork_apply_lag_seconds{since="event"} before
// and after: the quantiles of those forks placed by their fork event (by_event; a rescan
// may place one first), from the event to the SET's return, as the upper bounds of their
// buckets. The workload's side is the time from the workload's reply (the child exists)
// until a GET of the child shows node 1, polled every 50 µs. It prints one line for lab.sh,
// starting with label:
//
//	forklag n=50 by_event=… agent_p50_ms<=… agent_p99_ms<=… workload_p50_ms=… workload_p99_ms=…
//
// and, from numapref_fork_apply_stage_seconds (an agent that has it), where that lag goes,
// with the label's suffix after "forkstages":
//
//	forkstages n=… deliver_p50_ms<=… deliver_p99_ms<=… wait_… retry_… plan_… writeahead_… set_…
func forkLag(t *testing.T, cl *cluster, p *labPod, backend *prctl.Prctl, label string) {
	n := forkLagSamples
	before := lagBuckets(t, cl)
	stagesBefore := stageBuckets(t, cl)
	seen := placedLags(t, p.workload, backend, n)
	// Every child is placed, so every SET of a fork-event pass has returned and been
	// observed. A child a full pass placed first (a rescan due meanwhile) is not observed.
	after := lagBuckets(t, cl)
	stagesAfter := stageBuckets(t, cl)
	observed := after[math.Inf(1)] - before[math.Inf(1)]
	if observed == 0 {
		t.Fatalf("none of %d forks was placed by its fork event", n)
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	fmt.Printf("%s n=%d by_event=%.0f agent_p50_ms<=%s agent_p99_ms<=%s workload_p50_ms=%.2f workload_p99_ms=%.2f\n", label, n, observed,
		bucketQuantile(before, after, 0.5), bucketQuantile(before, after, 0.99), ms(seen[len(seen)/2]), ms(seen[len(seen)*99/100]))
	set := stagesAfter["set"]
	if set == nil { // an agent without the stages (an earlier commit's)
		return
	}
	line := fmt.Sprintf("forkstages%s n=%.0f", strings.TrimPrefix(label, "forklag"), set[math.Inf(1)]-stagesBefore["set"][math.Inf(1)])
	for _, stage := range []string{"deliver", "wait", "retry", "plan", "writeahead", "set"} {
		b, a := stagesBefore[stage], stagesAfter[stage]
		line += fmt.Sprintf(" %s_p50_ms<=%s %s_p99_ms<=%s", stage, bucketQuantile(b, a, 0.5), stage, bucketQuantile(b, a, 0.99))
	}
	fmt.Println(line)
}

// placedLags forks n children of w one at a time and returns, sorted, each one's time from
// the workload's answer (the child exists) until a GET shows it at node 1, polled every
// 50 µs.
func placedLags(t *testing.T, w *hostlab.Workload, backend *prctl.Prctl, n int) []time.Duration {
	t.Helper()
	var seen []time.Duration
	for range n {
		child, err := w.RawFork()
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err = testpoll.Context(ctx, 50*time.Microsecond, func() error { return placed(backend, child, 1) })
		cancel()
		if err != nil {
			t.Fatalf("forked child %d not placed: %v", child, err)
		}
		seen = append(seen, time.Since(start))
	}
	slices.Sort(seen)
	return seen
}

// forkFloor measures, in the agent's boot, the floor of fork to applied: a minimal program
// (a goroutine of this test) that receives the proc connector's fork events, subscribed
// to forks only, and SETs each child of its own workload (in no pod: the agent places
// nothing there) to node 1 at once, with no cgroup read, identity check or ledger. The
// same forks as forkLag, timed from the workload's side the same way; it prints a
// forkfloor line, which the lab's summary sets beside forklag (the goal: the agent's p99
// within 3 times this one's).
func forkFloor(t *testing.T, lab *hostlab.Lab, backend *prctl.Prctl) {
	_, _, w, err := lab.NamedWorkload(corev1.PodQOSBestEffort, "fork-floor", 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	pc, err := numa.DialProcConnector(numa.ProcEventFork)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			events, err := pc.Read(nil)
			if err != nil {
				return
			}
			for _, ev := range events {
				if ev.Kind == numa.ProcEventFork && ev.ParentTGID == w.Pid() && ev.ChildTID == ev.ChildTGID {
					_ = backend.Set(ev.ChildTID, 1)
				}
			}
		}
	}()
	t.Cleanup(func() { pc.Close(); <-done })
	seen := placedLags(t, w, backend, forkLagSamples)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	fmt.Printf("forkfloor n=%d workload_p50_ms=%.2f workload_p99_ms=%.2f\n", len(seen), ms(seen[len(seen)/2]), ms(seen[len(seen)*99/100]))
}

// lagBuckets reads the cumulative buckets of numapref_fork_apply_lag_seconds{since="event"}
// by upper bound.
func lagBuckets(t *testing.T, cl *cluster) map[float64]float64 {
	return histBuckets(t, cl, "numapref_fork_apply_lag_seconds", "since")["event"]
}

// stageBuckets reads the cumulative buckets of numapref_fork_apply_stage_seconds by stage.
func stageBuckets(t *testing.T, cl *cluster) map[string]map[float64]float64 {
	return histBuckets(t, cl, "numapref_fork_apply_stage_seconds", "stage")
}

// histBuckets reads the cumulative buckets of the agent's histogram name by the value of
// its label and by upper bound (+Inf: the count).
func histBuckets(t *testing.T, cl *cluster, name, label string) map[string]map[float64]float64 {
	t.Helper()
	mfs, err := cl.metrics()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[float64]float64{}
	for _, m := range mfs[name].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() != label {
				continue
			}
			byBound := map[float64]float64{}
			for _, b := range m.GetHistogram().GetBucket() {
				byBound[b.GetUpperBound()] = float64(b.GetCumulativeCount())
			}
			byBound[math.Inf(1)] = float64(m.GetHistogram().GetSampleCount())
			out[l.GetValue()] = byBound
		}
	}
	return out
}

// bucketQuantile is the upper bound, in ms, of the bucket that holds quantile q of the
// observations between before and after.
func bucketQuantile(before, after map[float64]float64, q float64) string {
	bounds := slices.Sorted(maps.Keys(after))
	total := after[math.Inf(1)] - before[math.Inf(1)]
	for _, le := range bounds {
		if after[le]-before[le] >= q*total {
			if math.IsInf(le, 1) {
				return "inf"
			}
			return strconv.FormatFloat(le*1000, 'f', 2, 64)
		}
	}
	return "inf"
}

// TestForkLagBeforeAfter measures fork→applied of an earlier commit's agent binary
// (hack/kernel/lab.sh --before REV puts it in the initramfs) and of this tree's, in one
// boot, one after the other: each places a pod of its own, then forkLag forks its
// workload. Only the workload's side compares like with like: the earlier binary's
// histogram may have other buckets. It prints forklag-before and forklag-after lines.
func TestForkLagBeforeAfter(t *testing.T) {
	if kernel := labenv.Kernel(t); kernel != "patched" {
		t.Fatalf("fork→applied needs the patched kernel, not %s", kernel)
	}
	if _, err := os.Stat(file(beforeBinaryName)); err != nil {
		t.Fatalf("no earlier binary (lab.sh --before REV puts it in the initramfs): %v", err)
	}
	backend, support := prctl.New(prPreferredNID, "/proc")
	if !support.Supported {
		t.Fatalf("the patched kernel does not prove the prctl: %s", support.Reason)
	}
	cl := newCluster(t, "patched")
	lab := newHostlab(t)
	for _, run := range []struct{ name, binary string }{{"before", beforeBinaryName}, {"after", agentBinaryName}} {
		t.Run(run.name, func(t *testing.T) {
			name := "lag-" + run.name
			labels := map[string]string{"app": name}
			p := cl.createPod(t, lab, name, labels, 4, false)
			cl.startAgentBinary(t, lab, run.binary, "state-"+run.name)
			cl.applyPreference(t, name, labels, 1)
			t.Cleanup(func() { cl.deletePreference(t, name) })
			tids, err := p.workload.TIDs()
			if err != nil {
				t.Fatal(err)
			}
			poll(t, apiWait, "every task of "+name+" placed", func() error { return allPlaced(backend, tids, 1) })
			forkLag(t, cl, p, backend, "forklag-"+run.name)
		})
	}
}
