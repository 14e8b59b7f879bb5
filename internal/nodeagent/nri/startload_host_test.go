// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build host && linux

package nri

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/numapref/numapref/internal/nodeagent"
	"github.com/numapref/numapref/internal/nodeagent/cgroups"
	"github.com/numapref/numapref/internal/nodeagent/desire"
	"github.com/numapref/numapref/internal/numa"
	"github.com/numapref/numapref/internal/numa/emulator"
	"github.com/numapref/numapref/internal/testutil/builders"
	"github.com/numapref/numapref/internal/testutil/ctrltest"
	"github.com/numapref/numapref/internal/testutil/hostlab"
	"github.com/numapref/numapref/internal/testutil/nriruntime"
	"github.com/numapref/numapref/internal/testutil/testenv"
)

// TestMain lets the test binary run as the lab's workloads and storms (hostlab).
func TestMain(m *testing.M) {
	hostlab.RunWorkloadIfAsked()
	os.Exit(m.Run())
}

// BenchmarkStartBesideLongPasses times a container start through the agent's NRI plugin
// (a real ttrpc connection to the runtime's adaptation, nriruntime) on a loaded node: the
// real engine on the kernel emulator and real lab cgroups, with one selected container at
// its task share (-max-tasks 4,096 here, the workload at 4,096 tasks, so that every full
// pass GETs them all) and a host fork storm of 1,000 forks a second; the StartPlacer
// decides from a cache that holds the pods and the NumaPreference (a fake client, synced).
// rescan=100ms runs those full passes back to back; rescan=10s is the agent's default.
//
//   - start=unselected: a pod no NumaPreference selects, against the same runtime with no
//     plugin (start=unselected,agent=none): the start latency the agent adds to every other
//     pod of the node.
//   - start=selected: a pod the NumaPreference selects, its container a lab container whose
//     workload stands for its init; its StartContainer returns once its tasks are set, or
//     at the plugin's deadline (placed-at-answer counts the starts whose init held its
//     node when the runtime had its answer).
//
// Each reports the StartContainer round trip's p50, p99 and max.
func BenchmarkStartBesideLongPasses(b *testing.B) {
	testenv.RequireRoot(b)
	for _, rescan := range []time.Duration{100 * time.Millisecond, 10 * time.Second} {
		b.Run("rescan="+rescan.String(), func(b *testing.B) { benchStartsBesidePasses(b, rescan) })
	}
}

// benchStartsBesidePasses is BenchmarkStartBesideLongPasses with the engine's rescan
// interval rescan.
func benchStartsBesidePasses(b *testing.B, rescan time.Duration) {
	lab, err := hostlab.New("/sys/fs/cgroup")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = lab.Close() })
	resolver, err := cgroups.NewResolver("/", cgroups.ResolverOptions{Driver: cgroups.DriverCgroupfs, KubeletCgroupRoot: lab.KubeletCgroupRoot()})
	if err != nil {
		b.Fatal(err)
	}
	emu := benchEmulator(b)
	const share = 4096
	big, bigDesire := labContainer(b, lab, "big", share-32) // its Go runtime has threads of its own
	pc, err := numa.DialProcConnector(numa.ProcEventFork)
	if err != nil {
		b.Skipf("opening the proc connector (CAP_NET_ADMIN): %v", err)
	}
	b.Cleanup(func() { pc.Close() })
	engine, err := nodeagent.NewEngine(nodeagent.EngineConfig{
		Resolver: resolver, Kernel: emu, Support: emu.Support(), OnlineNodes: []int{0, 1},
		LedgerPath: filepath.Join(b.TempDir(), "ledger.json"), RescanInterval: rescan,
		MaxTasksPerContainer: share, ForkReader: pc, Log: logr.Discard(),
	})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { _ = engine.Start(ctx); close(stopped) }()
	b.Cleanup(func() { cancel(); <-stopped })
	engine.SetDesired([]desire.Desire{bigDesire})
	waitPlaced(b, emu, big)

	storm, err := hostlab.StartStorm(1000, time.Hour, false)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(storm.Stop)

	pref := builders.MakePreference("ns", "db").Selector("app", "db").Node(0).Obj()
	objs := []client.Object{pref}
	starts := make([]selectedStart, 0, 40)
	for i := range cap(starts) {
		w, d := labContainer(b, lab, fmt.Sprintf("db-%d", i), 0)
		pod := builders.MakePod("ns", d.Pod.Name).Label("app", "db").Containers("main").Obj()
		pod.UID = d.PodUID
		objs = append(objs, pod)
		starts = append(starts, selectedStart{w: w, d: d})
	}
	reader := ctrltest.FakeAPI(b, objs...)
	placer := NewStartPlacer(reader, cgroups.NewNodeIdentity("node-a"), engine, nil, logr.Discard())
	withAgent := nriruntime.Start(b)
	startPlugin(b, withAgent.Direct, placer)
	withAgent.WaitPlugin()
	none := nriruntime.Start(b)

	unselected := func(r *nriruntime.Runtime, i int) error {
		pod := &api.PodSandbox{Id: fmt.Sprintf("sandbox-web-%d", i), Uid: fmt.Sprintf("uid-web-%d", i), Namespace: "ns",
			Name: fmt.Sprintf("web-%d", i), Labels: map[string]string{"app": "web"}}
		ctr := &api.Container{Id: fmt.Sprintf("%064x", i), PodSandboxId: pod.Id, Name: "main", State: api.ContainerState_CONTAINER_CREATED, Pid: 1}
		return r.StartContainer(pod, ctr)
	}
	time.Sleep(time.Second) // the storm at its rate, passes under way
	b.Run("start=unselected,agent=none", func(b *testing.B) { timeStarts(b, func(i int) error { return unselected(none, i) }) })
	b.Run("start=unselected", func(b *testing.B) { timeStarts(b, func(i int) error { return unselected(withAgent, i) }) })
	b.Run("start=selected", func(b *testing.B) {
		if b.N > len(starts) {
			b.Skipf("%d selected lab containers, %d starts asked", len(starts), b.N)
		}
		placed := 0
		defer func() { b.ReportMetric(float64(placed)/float64(b.N), "placed-at-answer/op") }()
		timeStarts(b, func(i int) error {
			s := starts[i]
			pod := &api.PodSandbox{Id: "sandbox-" + s.d.Pod.Name, Uid: string(s.d.PodUID), Namespace: "ns", Name: s.d.Pod.Name,
				Labels: map[string]string{"app": "db"}}
			ctr := &api.Container{Id: s.d.Ref.ContainerID, PodSandboxId: pod.Id, Name: "main", State: api.ContainerState_CONTAINER_CREATED,
				Pid: uint32(s.w.Pid())}
			if err := withAgent.StartContainer(pod, ctr); err != nil {
				return err
			}
			if v, err := emu.Get(s.w.Pid()); err == nil && v == 0 {
				placed++ // else the placer missed the plugin's deadline: the runtime starts it unplaced
			}
			return nil
		})
	})
}

// selectedStart is a lab container a selected pod's start names.
type selectedStart struct {
	w *hostlab.Workload
	d desire.Desire
}

// timeStarts runs b.N starts and reports their p50, p99 and max.
func timeStarts(b *testing.B, start func(i int) error) {
	lat := make([]time.Duration, 0, b.N)
	for i := range b.N {
		t0 := time.Now()
		if err := start(i); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	slices.Sort(lat)
	q := func(p float64) float64 {
		return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Microseconds()) / 1000
	}
	b.ReportMetric(q(0.5), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
	b.ReportMetric(float64(lat[len(lat)-1].Microseconds())/1000, "max-ms")
}

// benchEmulator is the kernel emulator on a state dir of its own, following forks, on a
// sysfs of two possible nodes.
func benchEmulator(b *testing.B) *emulator.Emulator {
	sys := b.TempDir()
	if err := os.MkdirAll(filepath.Join(sys, "devices/system/node"), 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(sys, "devices/system/node/possible"), []byte("0-1\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	emu, err := emulator.New(emulator.Options{StateDir: b.TempDir(), ProcRoot: "/proc", SysRoot: sys, ForkEvents: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { emu.Close() })
	return emu
}

// labContainer makes a BestEffort lab container of pod name running a workload with
// threads more threads, and the desire that asks for node 0.
func labContainer(b *testing.B, lab *hostlab.Lab, name string, threads int) (*hostlab.Workload, desire.Desire) {
	podUID, c, w, err := lab.NamedWorkload(corev1.PodQOSBestEffort, name, threads)
	if err != nil {
		b.Fatal(err)
	}
	d := desire.Desire{Pod: types.NamespacedName{Namespace: "ns", Name: name}, PodUID: types.UID(podUID), Container: "main",
		Ref: cgroups.ContainerRef{PodUID: podUID, QOS: corev1.PodQOSBestEffort, ContainerID: c.ContainerID}, Node: 0, Preference: "db"}
	return w, d
}

// waitPlaced waits until every task of w holds node 0.
func waitPlaced(b *testing.B, emu *emulator.Emulator, w *hostlab.Workload) {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		tids, err := w.TIDs()
		if err != nil {
			b.Fatal(err)
		}
		if !slices.ContainsFunc(tids, func(tid int) bool { v, err := emu.Get(tid); return err != nil || v != 0 }) {
			return
		}
		if time.Now().After(deadline) {
			b.Fatal("the selected workload never reached node 0")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
