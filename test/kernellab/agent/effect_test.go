// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build linux && kernellab

package agent

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/internal/nodeagent"
	"github.com/numapref/numapref/internal/numa"
	"github.com/numapref/numapref/internal/numa/mempolicy"
	"github.com/numapref/numapref/internal/numa/prctl"
	"github.com/numapref/numapref/internal/testutil/hostlab"
	"github.com/numapref/numapref/test/kernellab/labenv"
)

// The effect experiment's workload: streamThreads threads streaming over streamMiB MiB that
// they first touched while pinned to node 0's CPUs; sampled every second for sampleFor.
const (
	streamMiB     = 512
	streamThreads = 3
	sampleFor     = 90 * time.Second
	targetNode    = 1
	noFaulting    = "4294967295"
)

// scenario is one of the seed's four, or the fifth (the preference set before the workload touches its memory): the balancing mode, the scan
// settings, and when the agent places the workload on node 1, if at all.
type scenario struct {
	ID         int
	Name       string
	Tune       []string // numapref tune-balancing flags
	Preference placement
	// Policy, when not "", is the memory policy on node 1 the workload is created with, as
	// a runtime gives linux.memoryPolicy before the container's first instruction
	// (TestCRIPolicy proves the runtime's path): policyPreferred or policyPreferredMany.
	Policy string
	// Migrate says the NumaPreference asks for page migration (pageMigration: Once).
	Migrate bool
	// SampleFor is how long the scenario is sampled; 0 is sampleFor.
	SampleFor time.Duration
}

// The memory policies a workload can be created with.
const (
	policyPreferred     = "MPOL_PREFERRED"
	policyPreferredMany = "MPOL_PREFERRED_MANY|MPOL_F_NUMA_BALANCING"
)

// memoryPolicy is the policy on targetNode a scenario's workload is created with; nil for
// none.
func (s scenario) memoryPolicy() *mempolicy.Policy {
	switch s.Policy {
	case policyPreferred:
		p := mempolicy.Preferred(targetNode)
		return &p
	case policyPreferredMany:
		p := mempolicy.PreferredMany(numa.NewNodeMask(targetNode), true)
		return &p
	}
	return nil
}

// sampled is how long the scenario is sampled.
func (s scenario) sampled() time.Duration {
	if s.SampleFor > 0 {
		return s.SampleFor
	}
	return sampleFor
}

// shortSample is how long the scenarios of the mechanisms that act at once are sampled:
// enough for their locality at 5, 10 and 30 s.
const shortSample = 30 * time.Second

// placement is when a scenario's NumaPreference for node 1 comes, relative to the
// workload's first touch of its memory.
type placement int

const (
	// noPreference: the agent selects nothing.
	noPreference placement = iota
	// afterTouch: the preference is applied once the memory is touched, as the agent's
	// API path does for a program that allocates before its pod's status arrives.
	afterTouch
	// beforeTouch: the preference exists before the pod, and the touch starts only once
	// every task of the container has its forced node, as NRI places a container at its
	// start, before its first instruction.
	beforeTouch
)

// defaultScan are the kernel's default scan settings (kernel/sched/fair.c).
var defaultScan = []string{"-scan-delay-ms=1000", "-scan-period-min-ms=1000", "-scan-period-max-ms=60000", "-scan-size-mb=256"}

var scenarios = []scenario{
	{1, "numa_balancing=0, no preference", append([]string{"-numa-balancing=0"}, defaultScan...), noPreference, "", false, 0},
	{2, "numa_balancing=1, no preference", append([]string{"-numa-balancing=1"}, defaultScan...), noPreference, "", false, 0},
	{3, "numa_balancing=1, preference node 1, no faulting", []string{"-numa-balancing=1",
		"-scan-delay-ms=" + noFaulting, "-scan-period-min-ms=" + noFaulting, "-scan-period-max-ms=" + noFaulting, "-scan-size-mb=256"}, afterTouch, "", false, 0},
	{4, "numa_balancing=1, preference node 1, default scanning", append([]string{"-numa-balancing=1"}, defaultScan...), afterTouch, "", false, 0},
	// 4 with the preference set before the touch: the same tuning, workload and touch.
	{5, "numa_balancing=1, preference node 1 set before the touch, default scanning", append([]string{"-numa-balancing=1"}, defaultScan...), beforeTouch, "", false, 0},
	// 5 with the workload created with its home's memory policy: the prctl and a policy
	// at creation.
	{6, "numa_balancing=1, preference node 1 before the touch and a memory policy on node 1 at creation (" + policyPreferredMany + ")",
		append([]string{"-numa-balancing=1"}, defaultScan...), beforeTouch, policyPreferredMany, false, shortSample},
	// 4 with page migration: the prctl and the agent moving the pages after the touch.
	{7, "numa_balancing=1, preference node 1 after the touch with pageMigration Once",
		append([]string{"-numa-balancing=1"}, defaultScan...), afterTouch, "", true, shortSample},
}

// controlScenarios run on the control kernel (Debian's 6.12 without the patch): what a
// mainline kernel offers, against nothing. The IDs follow the patched kernel's.
var controlScenarios = []scenario{
	{10, "control kernel, numa_balancing=1, nothing", append([]string{"-numa-balancing=1"}, defaultScan...), noPreference, "", false, shortSample},
	{11, "control kernel, numa_balancing=1, a memory policy on node 1 at creation (" + policyPreferredMany + ")",
		append([]string{"-numa-balancing=1"}, defaultScan...), noPreference, policyPreferredMany, false, shortSample},
	{12, "control kernel, numa_balancing=1, a memory policy on node 1 at creation (" + policyPreferred + ")",
		append([]string{"-numa-balancing=1"}, defaultScan...), noPreference, policyPreferred, false, shortSample},
	{13, "control kernel, numa_balancing=1, preference node 1 after the touch with pageMigration Once",
		append([]string{"-numa-balancing=1"}, defaultScan...), afterTouch, "", true, shortSample},
}

// sample is one second of one scenario, as effect.jsonl records it (test/kernellab/effectreport
// reads it).
type sample struct {
	Scenario int     `json:"scenario"`
	T        float64 `json:"t"`
	// Source is "agent" (the running agent's /metrics) or "collector" (no preference: the
	// agent selects nothing and so exports nothing for the container; the lab runs the
	// agent's own EffectCollector over the container instead).
	Source   string  `json:"source"`
	Locality float64 `json:"locality"` // share of the container's memory on node 1
	Node0MiB float64 `json:"node0MiB"`
	Node1MiB float64 `json:"node1MiB"`
	Faults   float64 `json:"faults"`   // numapref_container_numa_faults
	Migrated float64 `json:"migrated"` // numapref_container_numa_pages_migrated
	// WorkersOnNode1 of Workers streaming threads had current_node=1.
	Workers        int `json:"workers"`
	WorkersOnNode1 int `json:"workersOnNode1"`
	// Moved counts the pages the agent's page migration moved (numapref_migrated_pages_total).
	Moved float64 `json:"moved"`
	// Err says why the metrics were not all there (the agent lists a container on its
	// first pass after the preference arrives); the sample's metric values are then not
	// measured.
	Err string `json:"err,omitempty"`
}

// TestEffect runs the seed's four scenarios, the fifth (4 with the preference set before
// the touch), and 5 and 4 with a memory policy at creation and with page migration, on the
// patched kernel with the agent placing the workload, sampling every second, and writes
// effect.jsonl (every sample) and effect-scenarios.jsonl (each scenario's command) to the
// report directory.
func TestEffect(t *testing.T) {
	labenv.RequireKernel(t, "patched") // the effect experiment needs the patch
	runEffect(t, "patched", scenarios)
}

// TestEffectControl runs the workload on the control kernel (no patch) with what mainline
// offers: nothing, a memory policy at creation (each soft mode the kernel takes), and the
// agent's page migration after the touch, into the same files of its boot's report
// directory. The migration must move the pages: the agent's report counts them.
func TestEffectControl(t *testing.T) {
	labenv.RequireKernel(t, "control")
	runEffect(t, "control", controlScenarios)
}

// runEffect runs scenarios on kernel with the agent (page migration on) and writes their
// samples and commands.
func runEffect(t *testing.T, kernel string, scenarios []scenario) {
	cl := newCluster(t, kernel)
	lab := newHostlab(t)
	restore := currentTuning(t)
	t.Cleanup(func() { tune(t, restore...) })
	cl.startAgent(t, lab, "--page-migration-rate="+strconv.Itoa(migrationRate))
	node0CPUs := strings.TrimSpace(readFile(t, "/sys/devices/system/node/node0/cpulist"))

	out, err := os.Create(filepath.Join(reportDir(cl), "effect.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	var commands []map[string]any
	for _, s := range scenarios {
		t.Run(fmt.Sprintf("scenario %d", s.ID), func(t *testing.T) {
			cmd := runScenario(t, cl, lab, s, node0CPUs, out)
			commands = append(commands, map[string]any{"id": s.ID, "name": s.Name, "command": cmd, "seconds": s.sampled().Seconds()})
		})
	}
	f, err := os.Create(filepath.Join(reportDir(cl), "effect-scenarios.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, c := range commands {
		if err := writeJSONLine(f, c); err != nil {
			t.Fatal(err)
		}
	}
}

// migrationRate is the agent's --page-migration-rate in the lab: the chart's default.
const migrationRate = 25600

func reportDir(cl *cluster) string {
	if cl.reportTo != "" {
		return cl.reportTo
	}
	return cl.tmp
}

// runScenario tunes the kernel with numapref tune-balancing, starts a fresh workload (new
// tasks pick up the scan settings at fork), places it when the scenario says so (before
// or after its first touch), and samples it; it returns the scenario's commands.
func runScenario(t *testing.T, cl *cluster, lab *hostlab.Lab, s scenario, node0CPUs string, out *os.File) string {
	cmds := []string{"numapref tune-balancing " + strings.Join(s.Tune, " ")}
	tune(t, s.Tune...)
	name := fmt.Sprintf("effect-%d", s.ID)
	labels := map[string]string{"app": name}
	var spec []string
	if s.Migrate {
		spec = append(spec, "pageMigration: Once", "memoryPolicy: Never")
	}
	apply := func(when string) {
		cl.applyPreference(t, name, labels, targetNode, spec...)
		cmds = append(cmds, fmt.Sprintf("kubectl apply -f %s.yaml (NumaPreference: selector app=%s, node %d%s) %s", name, name, targetNode,
			strings.Join(append([]string{""}, spec...), ", "), when))
	}
	if s.Preference == beforeTouch {
		apply("before the pod")
		defer cl.deletePreference(t, name)
	}
	p := cl.createPodWithPolicy(t, lab, name, labels, 0, true, s.memoryPolicy())
	defer p.workload.Stop()
	if s.Policy != "" {
		cmds = append(cmds, "the workload created with "+s.memoryPolicy().String()+" (a runtime's linux.memoryPolicy)")
	}
	if s.Preference == beforeTouch {
		waitPlaced(t, p)
		cmds = append(cmds, "the touch once every task of the container reads node 1 (prctl GET)")
	}
	touch := time.Now()
	workers, err := p.workload.Stream(streamMiB, streamThreads, node0CPUs)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d MiB first touched on node 0's CPUs (%s) by %d threads in %s", streamMiB, node0CPUs, len(workers), time.Since(touch).Round(time.Millisecond))
	if s.Preference == beforeTouch {
		// The streaming threads are new: each was cloned from a task that had node 1
		// already, and threads inherit it (the agent's fork events may SET them again,
		// with the value they have). This confirms they carry it after the touch.
		if err := allPlaced(mustPrctl(t), workers, targetNode); err != nil {
			t.Fatalf("a streaming thread did not inherit node 1: %v", err)
		}
	}
	start := time.Now()
	if s.Preference == afterTouch {
		apply("after the touch")
		defer cl.deletePreference(t, name)
	}
	collector := nodeagent.NewEffectCollector(containerView{p: p}, "/proc", 2)
	var last sample
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for i := 0; time.Since(start) < s.sampled()+500*time.Millisecond; i++ {
		smp := sample{Scenario: s.ID, T: time.Since(start).Seconds(), Workers: len(workers)}
		var values map[string]float64
		if s.Preference != noPreference {
			smp.Source = "agent"
			values, err = agentValues(cl, p)
		} else {
			smp.Source = "collector"
			values, err = collectorValues(collector, p)
		}
		if err != nil {
			smp.Err = err.Error()
		}
		smp.Locality, smp.Faults, smp.Migrated = values["locality"], values["faults"], values["migrated"]
		smp.Node0MiB, smp.Node1MiB, smp.Moved = values["node0"]/(1<<20), values["node1"]/(1<<20), values["moved"]
		for _, tid := range workers {
			if st, err := numa.ReadSchedNUMA("/proc", tid); err == nil && st.CurrentNode == targetNode {
				smp.WorkersOnNode1++
			}
		}
		if err := writeJSONLine(out, smp); err != nil {
			t.Fatal(err)
		}
		last = smp
		<-tick.C
	}
	t.Logf("scenario %d (%s): after %.0f s locality %.3f (node0 %.0f MiB, node1 %.0f MiB), faults %.0f, migrated %.0f, workers on node 1 %d/%d",
		s.ID, s.Name, last.T, last.Locality, last.Node0MiB, last.Node1MiB, last.Faults, last.Migrated, last.WorkersOnNode1, last.Workers)
	if s.Preference != noPreference && kernelHasPrctl() {
		if err := allPlaced(mustPrctl(t), workers, targetNode); err != nil {
			t.Errorf("the workers are not placed at the end: %v", err)
		}
	}
	checkScenario(t, cl, name, s, last)
	return strings.Join(cmds, "; ")
}

// waitPlaced waits until the agent has given every task of the pod's workload node 1, as
// the real prctl GET reads it.
func waitPlaced(t *testing.T, p *labPod) {
	t.Helper()
	backend := mustPrctl(t)
	start := time.Now()
	poll(t, apiWait, "the agent placing the workload before its touch", func() error {
		tids, err := p.workload.TIDs()
		if err != nil {
			return err
		}
		return allPlaced(backend, tids, targetNode)
	})
	t.Logf("every task of the workload reads node %d %s after the pod's status named its container", targetNode, time.Since(start).Round(time.Millisecond))
}

// agentValues scrapes the running agent's /metrics for the pod's container, and the pages
// it moved.
func agentValues(cl *cluster, p *labPod) (map[string]float64, error) {
	mfs, err := cl.metrics()
	if err != nil {
		return nil, err
	}
	values, err := effectValues(mfs, p)
	values["moved"], _ = series(mfs, "numapref_migrated_pages_total", nil)
	return values, err
}

// kernelHasPrctl says whether this boot's kernel has the preferred-node prctl.
func kernelHasPrctl() bool {
	_, support := prctl.New(prPreferredNID, "/proc")
	return support.Supported
}

// checkScenario checks what a mechanism must have done by the scenario's end, last its
// last sample: a policy at creation keeps the memory on node 1 from the start; the agent's
// migration moved pages, and the node's report counts them for the preference and says
// the container was placed by migrate. The goals (locality at 5 and 10 s) are the
// table's, not asserts.
func checkScenario(t *testing.T, cl *cluster, name string, s scenario, last sample) {
	t.Helper()
	if s.Policy != "" && last.Locality < 0.9 {
		t.Errorf("created with %s, the workload's memory on node %d is %.2f of it at the end, want most of it", s.Policy, targetNode, last.Locality)
	}
	if !s.Migrate {
		return
	}
	if last.Moved <= 0 {
		t.Errorf("numapref_migrated_pages_total is %v at the end, want the pages moved", last.Moved)
	}
	poll(t, apiWait, "the node's report counting the pages moved", func() error {
		_, e, err := cl.reportEntry(name)
		switch {
		case err != nil:
			return err
		case e == nil:
			return errors.New("no entry for the preference")
		case e.Migrated != 1 || e.PagesMigrated <= 0:
			return fmt.Errorf("entry says %d containers migrated, %d pages moved, %d not; want 1 and some pages", e.Migrated, e.PagesMigrated, e.PagesNotMigrated)
		}
		return nil
	})
	logMoveEnd(t, cl)
}

// logMoveEnd logs how the agent's page moves went, from its /metrics: the pages that
// stayed where they were and the moves that ended, by how; the table has only the pages
// moved.
func logMoveEnd(t *testing.T, cl *cluster) {
	t.Helper()
	mfs, err := cl.metrics()
	if err != nil {
		t.Logf("the agent's metrics after the move: %v", err)
		return
	}
	stayed, _ := series(mfs, "numapref_migration_failed_pages_total", nil)
	var ended []string
	for _, m := range mfs["numapref_migrations_ended_total"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "reason" && m.GetCounter().GetValue() > 0 {
				ended = append(ended, fmt.Sprintf("%s %v", l.GetValue(), m.GetCounter().GetValue()))
			}
		}
	}
	t.Logf("the agent's page moves: %v pages stayed where they were; moves ended: %v", stayed, ended)
}

// collectorValues runs the agent's EffectCollector over the container, as the agent's
// /metrics would if it selected it.
func collectorValues(c prometheus.Collector, p *labPod) (map[string]float64, error) {
	reg := prometheus.NewRegistry()
	if err := reg.Register(c); err != nil {
		return nil, err
	}
	list, err := reg.Gather()
	if err != nil {
		return nil, err
	}
	mfs := map[string]*dto.MetricFamily{}
	for _, mf := range list {
		mfs[mf.GetName()] = mf
	}
	return effectValues(mfs, p)
}

func effectValues(mfs map[string]*dto.MetricFamily, p *labPod) (map[string]float64, error) {
	pod := map[string]string{"namespace": workloadNS, "pod": p.pod.Name, "container": "main"}
	values := map[string]float64{}
	var missing []string
	for key, f := range map[string]string{
		"locality": "numapref_container_memory_locality_ratio",
		"faults":   "numapref_container_numa_faults",
		"migrated": "numapref_container_numa_pages_migrated",
	} {
		v, ok := series(mfs, f, pod)
		if !ok {
			missing = append(missing, f)
		}
		values[key] = v
	}
	for node := range 2 {
		want := map[string]string{"namespace": workloadNS, "pod": p.pod.Name, "container": "main", "numa_node": strconv.Itoa(node)}
		v, ok := series(mfs, "numapref_container_memory_bytes", want)
		if !ok {
			missing = append(missing, fmt.Sprintf("numapref_container_memory_bytes{numa_node=%d}", node))
		}
		values["node"+strconv.Itoa(node)] = v
	}
	if len(missing) > 0 {
		return values, fmt.Errorf("no series %v for pod %s", missing, p.pod.Name)
	}
	return values, nil
}

// containerView is the one container as the engine would list it, preferring node 1.
type containerView struct{ p *labPod }

func (v containerView) Managed() []nodeagent.ManagedContainer {
	pid := v.p.workload.Pid()
	tids, _ := numa.ListThreads("/proc", pid)
	return []nodeagent.ManagedContainer{{
		PodNamespace: workloadNS, PodName: v.p.pod.Name, PodUID: string(v.p.pod.UID), Container: "main",
		Node: targetNode, Reason: numav1.ReasonApplied, CgroupPath: v.p.container.Path(),
		CgroupDir: filepath.Join("/sys/fs/cgroup", v.p.container.Path()), TIDs: tids, PIDs: []int{pid},
	}}
}

// tune runs the agent binary's own `numapref tune-balancing`, the chart's init container's
// command.
func tune(t *testing.T, flags ...string) {
	t.Helper()
	out, err := exec.Command(file(agentBinaryName), append([]string{"tune-balancing"}, flags...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("numapref tune-balancing %s: %v\n%s", strings.Join(flags, " "), err, out)
	}
	t.Logf("numapref tune-balancing %s:\n%s", strings.Join(flags, " "), strings.TrimSpace(string(out)))
}

// currentTuning is the tune-balancing flags that put back what the kernel has now.
func currentTuning(t *testing.T) []string {
	t.Helper()
	mode, err := numa.ReadBalancing("/proc")
	if err != nil {
		t.Fatal(err)
	}
	k, err := numa.ReadScanKnobs("/proc", "/sys/kernel/debug")
	if err != nil {
		t.Fatal(err)
	}
	return []string{
		fmt.Sprintf("-numa-balancing=%d", mode), fmt.Sprintf("-scan-delay-ms=%d", k.ScanDelayMs),
		fmt.Sprintf("-scan-period-min-ms=%d", k.ScanPeriodMinMs), fmt.Sprintf("-scan-period-max-ms=%d", k.ScanPeriodMaxMs),
		fmt.Sprintf("-scan-size-mb=%d", k.ScanSizeMB),
	}
}

func mustPrctl(t *testing.T) *prctl.Prctl {
	t.Helper()
	p, support := prctl.New(prPreferredNID, "/proc")
	if !support.Supported {
		t.Fatalf("the patched kernel does not prove the prctl: %s", support.Reason)
	}
	return p
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
