// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build integration

package agent

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/internal/cpuset"
	"github.com/numapref/numapref/internal/nodeagent"
	"github.com/numapref/numapref/internal/nodeagent/cgroups"
	"github.com/numapref/numapref/internal/nodeagent/devices"
	"github.com/numapref/numapref/internal/nodeagent/nri"
	"github.com/numapref/numapref/internal/numa"
	"github.com/numapref/numapref/internal/numa/emulator"
	"github.com/numapref/numapref/internal/numa/prctl"
	"github.com/numapref/numapref/internal/testutil/builders"
	"github.com/numapref/numapref/internal/testutil/ctrltest"
	"github.com/numapref/numapref/internal/testutil/hostlab"
	"github.com/numapref/numapref/internal/testutil/testenv"
)

// The whole agent on this host: controllers against the real apiserver, the real engine,
// real cgroups and processes (the spec plays the kubelet's part), the emulated kernel.
var _ = Describe("Node agent with the real engine on this host", Ordered, func() {
	ctx := context.Background()
	var (
		ns   string
		host *realHost
		lab  *hostlab.Lab
		emu  *emulator.Emulator
	)

	BeforeAll(func() {
		host = newRealHost("node-real", "")
		host.start(env.Config, 0)
		lab, emu = host.lab, host.emu
		ns = env.NewNamespace(ctx)
	})

	startPod := func(name string, labels map[string]string, threads int) *hostlab.Workload {
		return startLabPod(ctx, lab, ns, "node-real", name, labels, threads)
	}
	nodesOf := func(g Gomega, pids ...int) []int { return emulatedNodes(g, emu, pids...) }

	It("applies a NumaPreference to every task, keeps it across forks, reports it, and undoes it on delete", func() {
		db := startPod("db-0", map[string]string{"app": "db"}, 5)
		bystander := startPod("web-0", map[string]string{"app": "web"}, 2)
		Expect(env.Client.Create(ctx, builders.MakePreference(ns, "db").Selector("app", "db").Node(0).Obj())).To(Succeed())

		Eventually(func(g Gomega) { g.Expect(nodesOf(g, db.Pid())).To(HaveEach(0)) }).Should(Succeed())
		Eventually(func(g Gomega) {
			p := env.Preference(ctx, ns, "db")(g)
			g.Expect(ctrltest.Condition(p, numav1.ConditionReady).Status).To(Equal(metav1.ConditionTrue))
			g.Expect(p.Status.Summary.Pods).To(Equal(int32(1)))
			g.Expect(p.Status.Summary.Tasks).To(BeNumerically(">=", 6))
		}).Should(Succeed())
		Expect(nodesOf(Default, bystander.Pid())).To(HaveEach(-1), "a pod nobody selected was touched")

		shell, forked, err := db.Fork()
		Expect(err).NotTo(HaveOccurred())
		Eventually(func(g Gomega) { g.Expect(nodesOf(g, shell, forked)).To(HaveEach(0)) }).Should(Succeed())

		var pref numav1.NumaPreference
		Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "db"}, &pref)).To(Succeed())
		Expect(env.Client.Delete(ctx, &pref)).To(Succeed())
		Eventually(func(g Gomega) { g.Expect(nodesOf(g, db.Pid(), shell, forked)).To(HaveEach(-1)) }).Should(Succeed())
	})

	It("sets nothing while it cannot write its ledger, says so in a LedgerError Event, and applies once it can", func() {
		// A link where the ledger goes: the agent neither follows nor replaces it, so every
		// write fails, as on a full or read-only disk (those are the engine's host tests).
		// The running agent may write a new ledger between the removal and the link: try again.
		ledger := filepath.Join(host.stateDir, "ledger.json")
		Eventually(func() error {
			if err := os.Remove(ledger); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
			return os.Symlink(filepath.Join(host.stateDir, "elsewhere"), ledger)
		}).Should(Succeed())
		w := startPod("ledger-0", map[string]string{"app": "ledger"}, 2)
		Expect(env.Client.Create(ctx, builders.MakePreference(ns, "ledger").Selector("app", "ledger").Node(0).Obj())).To(Succeed())
		var pod corev1.Pod
		Expect(env.Client.Get(ctx, keyOf(ns, "ledger-0"), &pod)).To(Succeed())
		expectPodEvent(ctx, &pod, numav1.ReasonLedgerError, "the ledger could not be written")
		Consistently(func(g Gomega) { g.Expect(nodesOf(g, w.Pid())).To(HaveEach(-1)) }, "1500ms").Should(Succeed(),
			"no SET without its ledger entry, retries included")

		Expect(os.Remove(ledger)).To(Succeed())
		Eventually(func(g Gomega) { g.Expect(nodesOf(g, w.Pid())).To(HaveEach(0)) }).Should(Succeed(), "a retry applies once the ledger can be written")
		expectPodEvent(ctx, &pod, numav1.ReasonApplied, "prefers NUMA node 0 (NumaPreference ledger)")
	})
})

// startRealAgentOn runs the whole agent for node against the apiserver at c: the real
// engine on lab cgroups of this host, fork events, the emulated kernel, on the NUMA
// topology of sysRoot ("" for this host's).
func startRealAgentOn(c *rest.Config, node, sysRoot string) (*hostlab.Lab, *emulator.Emulator) {
	GinkgoHelper()
	h := newRealHost(node, sysRoot)
	h.start(c, 0)
	return h.lab, h.emu
}

// realHost is what outlives an agent on this host: lab cgroups, the emulated kernel, and
// the agent's state directory (ledger, persisted desired state and NumaPreferences). start runs an agent on it;
// after stopping one, start runs it again, as a restarted pod would.
type realHost struct {
	node     string
	lab      *hostlab.Lab
	emu      *emulator.Emulator
	resolver engineResolver
	topo     *numa.Topology
	topoRoot string
	stateDir string
	// kernel, when set, is the engine's kernel in place of emu (a wrapper of it); engine
	// is the last started agent's.
	kernel prctl.Kernel
	engine *nodeagent.Engine
	// prefs is the last started agent's store of the NumaPreferences it saw, in stateDir.
	prefs *nri.PreferenceStore
	// devices, when set, reads the pods' devices (FollowDevices).
	devices devices.Reader
}

// engineResolver is what the engine needs of the cgroup resolver.
type engineResolver interface {
	Resolve(cgroups.ContainerRef) (*cgroups.Container, error)
	ListTIDs(*cgroups.Container) ([]cgroups.TaskRef, error)
	ThreadIDs(*cgroups.Container) ([]int, error)
	Cpuset(*cgroups.Container) (cpuset.Cpuset, error)
	ProcRoot() string
}

// newRealHost makes the host of node's agent on the NUMA topology of sysRoot ("" for this
// host's).
func newRealHost(node, sysRoot string) *realHost {
	GinkgoHelper()
	// It makes cgroups and acts on processes.
	testenv.Require(GinkgoTB(), os.Geteuid() == 0, "root (uid 0)", "sudo make integration")
	h := &realHost{node: node, topoRoot: sysRoot, stateDir: GinkgoT().TempDir()}
	lab, err := hostlab.New("/sys/fs/cgroup")
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(lab.Close)
	h.lab = lab
	if h.topoRoot == "" {
		h.topoRoot = "/sys"
	}
	h.topo, err = numa.DiscoverTopology(h.topoRoot)
	Expect(err).NotTo(HaveOccurred())
	h.emu, err = emulator.New(emulator.Options{StateDir: GinkgoT().TempDir(), ForkEvents: true, SysRoot: sysRoot})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(h.emu.Close)
	resolver, err := cgroups.NewResolver("/", cgroups.ResolverOptions{
		Driver: cgroups.DriverCgroupfs, KubeletCgroupRoot: lab.KubeletCgroupRoot()})
	Expect(err).NotTo(HaveOccurred())
	h.resolver = resolver
	if sysRoot != "" {
		// This host has one NUMA node, so its real cpusets say mems 0. On the fixture
		// machine a container's cpuset spans the fixture's nodes and CPUs.
		h.resolver = fixtureCpusets{Resolver: resolver, topo: h.topo}
	}
	return h
}

// start runs the agent against the apiserver at c: its engine, with fork events and the
// host's state directory, in a manager with the summarizer (see withSyncTimeout for
// syncTimeout).
func (h *realHost) start(c *rest.Config, syncTimeout time.Duration) *runningAgent {
	GinkgoHelper()
	pe, err := numa.OpenProcEvents()
	testenv.RequireNoError(GinkgoTB(), err, "opening the proc connector (CAP_NET_ADMIN)", "sudo make integration")
	DeferCleanup(pe.Close)
	kernel := h.kernel
	if kernel == nil {
		kernel = h.emu
	}
	engine, err := nodeagent.NewEngine(nodeagent.EngineConfig{
		Resolver: h.resolver, Kernel: kernel, Support: h.emu.Support(), OnlineNodes: h.topo.Online, CPUNode: h.topo.CPUNode,
		MemFree:    func(n int) (uint64, error) { return numa.ReadNodeMemFree(h.topoRoot, n) },
		LedgerPath: filepath.Join(h.stateDir, "ledger.json"), DesiredPath: filepath.Join(h.stateDir, "desired.json"),
		ProcEvents: pe.Events(), RescanInterval: time.Hour, Log: log.Log.WithName("engine"), Devices: h.devices,
	})
	Expect(err).NotTo(HaveOccurred())
	h.engine = engine
	h.prefs = nri.NewPreferenceStore(filepath.Join(h.stateDir, "preferences.json"), log.Log.WithName("preferences"))
	opts := testAgentOptions
	opts.Preferences = h.prefs
	a := startAgent(h.node, engine, withConfig(c), withOptions(opts), withSummarizer(), withSyncTimeout(syncTimeout), withRunnables(engine))
	stop := a.stop
	a.stop = func() { stop(); pe.Close() }
	return a
}

// fixtureCpusets is a resolver whose containers' cpusets span a fixture topology.
type fixtureCpusets struct {
	*cgroups.Resolver
	topo *numa.Topology
}

func (f fixtureCpusets) Cpuset(*cgroups.Container) (cpuset.Cpuset, error) {
	cs := cpuset.Cpuset{Mems: f.topo.Online}
	for cpu := range f.topo.CPUNode {
		cs.CPUs = append(cs.CPUs, cpu)
	}
	slices.Sort(cs.CPUs)
	return cs, nil
}

// startLabPod creates a pod on node, its container cgroup in lab and a workload in it, and
// reports the container running: the kubelet's part.
func startLabPod(ctx context.Context, lab *hostlab.Lab, ns, node, name string, labels map[string]string, threads int) *hostlab.Workload {
	GinkgoHelper()
	pod := builders.MakePod(ns, name).Node(node).Labels(labels).Containers("main").Obj()
	Expect(env.Client.Create(ctx, pod)).To(Succeed())
	builders.MarkRunning(pod)
	c, err := lab.Container(pod.Status.QOSClass, string(pod.UID), strings.TrimPrefix(pod.Status.ContainerStatuses[0].ContainerID, "containerd://"))
	Expect(err).NotTo(HaveOccurred())
	w, err := c.StartWorkload(threads)
	Expect(err).NotTo(HaveOccurred())
	Expect(env.Client.Status().Update(ctx, pod)).To(Succeed())
	return w
}

// emulatedNodes reads every task of pids through the emulator.
func emulatedNodes(g Gomega, emu *emulator.Emulator, pids ...int) []int {
	var out []int
	for _, pid := range pids {
		tids, err := hostlab.TasksOf(pid)
		g.Expect(err).NotTo(HaveOccurred())
		for _, tid := range tids {
			v, err := emu.Get(tid)
			g.Expect(err).NotTo(HaveOccurred())
			out = append(out, v)
		}
	}
	return out
}
