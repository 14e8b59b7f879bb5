// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build integration

package agent

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/containerd/nri/pkg/api"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/internal/nodeagent/cgroups"
	"github.com/numapref/numapref/internal/nodeagent/desire"
	"github.com/numapref/numapref/internal/nodeagent/nri"
	"github.com/numapref/numapref/internal/numa/mempolicy"
	"github.com/numapref/numapref/internal/numa/prctl"
	"github.com/numapref/numapref/internal/testutil/builders"
	"github.com/numapref/numapref/internal/testutil/nriruntime"
)

// setCounter records the tasks the engine SETs, in order.
type setCounter struct {
	prctl.Kernel
	mu   sync.Mutex
	tids []int
}

func (k *setCounter) Set(tid, node int) error {
	k.mu.Lock()
	k.tids = append(k.tids, tid)
	k.mu.Unlock()
	return k.Kernel.Set(tid, node)
}

// set returns the tasks set so far.
func (k *setCounter) set() []int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Clone(k.tids)
}

// The agent as an NRI plugin: the runtime's side (nri's adaptation, as containerd embeds
// it) in this process, the whole agent on this host with the real engine, the API server
// for real; the spec plays the kubelet and the runtime.
var _ = Describe("Placing a container at its start (NRI)", func() {
	ctx := context.Background()

	It("places a selected container when the runtime starts it, before the kubelet reports it running, and the report costs no SET", func() {
		host := newRealHost("node-nri", "")
		kernel := &setCounter{Kernel: host.emu}
		host.kernel = kernel
		a := host.start(env.Config, 0)
		ns := env.NewNamespace(ctx)
		Expect(env.Client.Create(ctx, builders.MakePreference(ns, "db").Selector("app", "db").Node(0).Obj())).To(Succeed())

		// The pod the kubelet is starting: in the API, its container not running yet.
		pod := builders.MakePod(ns, "db-0").Node("node-nri").Label("app", "db").Containers("main").Obj()
		Expect(env.Client.Create(ctx, pod)).To(Succeed())
		Eventually(func(g Gomega) {
			var cached corev1.Pod
			g.Expect(a.mgr.GetClient().Get(ctx, client.ObjectKeyFromObject(pod), &cached)).To(Succeed())
			var prefs numav1.NumaPreferenceList
			g.Expect(a.mgr.GetClient().List(ctx, &prefs, client.InNamespace(ns))).To(Succeed())
			g.Expect(prefs.Items).To(HaveLen(1))
			// The engine acts once it has a desired state: the agent's first reconcile, which
			// its node's report follows.
			g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: "node-nri"}, &numav1.NumaNodeReport{})).To(Succeed())
		}).Should(Succeed(), "the agent's cache holds the pod and the preference, and the agent has reconciled")

		// runc create: the container's cgroup and its init process.
		builders.MarkRunning(pod)
		id := strings.TrimPrefix(pod.Status.ContainerStatuses[0].ContainerID, "containerd://")
		c, err := host.lab.Container(pod.Status.QOSClass, string(pod.UID), id)
		Expect(err).NotTo(HaveOccurred())
		init, err := c.StartWorkload(0)
		Expect(err).NotTo(HaveOccurred())

		// The runtime, and the agent's plugin connected to it. StartContainer comes between
		// runc create and runc start; when the runtime has the plugin's answer, the init is
		// placed: no waiting here.
		runtime := connectPlugin(nri.NewStartPlacer(a.mgr.GetClient(), cgroups.NewNodeIdentity("node-nri"), host.engine, nil, log.Log.WithName("start")))
		startContainer(runtime, pod, id, init.Pid())
		node, err := host.emu.Get(init.Pid())
		Expect(err).NotTo(HaveOccurred())
		Expect(node).To(Equal(0), "the init task's node when the runtime's StartContainer returns")
		atStart := kernel.set()
		Expect(atStart).To(ContainElement(init.Pid()))

		// The kubelet reports the container running: the API path finds it placed.
		Expect(env.Client.Status().Update(ctx, pod)).To(Succeed())
		expectPodEvent(ctx, pod, numav1.ReasonApplied, "prefers NUMA node 0 (NumaPreference db)")
		Eventually(func(g Gomega) {
			r, ok := host.engine.Results()[desire.ContainerKey{PodUID: pod.UID, Container: "main"}]
			g.Expect(ok).To(BeTrue())
			g.Expect(r.Reason).To(Equal(numav1.ReasonApplied))
			g.Expect(r.Desire.Ref.ContainerID).To(Equal(pod.Status.ContainerStatuses[0].ContainerID), "the API's desire rules")
		}).Should(Succeed())
		host.engine.Pass()
		// No task the start set is set again. (A thread the workload's runtime started
		// since is new, and set once.)
		after := kernel.set()[len(atStart):]
		for _, tid := range after {
			Expect(atStart).NotTo(ContainElement(tid), "SETs after the start's: %v, the start's %v", after, atStart)
		}
	})

	It("says in the node's report and label whether the agent is registered with the runtime, at each change", func() {
		const nodeName = "node-nri-state"
		runtime := nriruntime.New(GinkgoTB()) // no socket yet: a runtime without NRI, or not up
		plugin, err := nri.New(nri.Config{Socket: runtime.Socket, Log: log.Log.WithName("nri"), Placer: noPlacer{},
			MinBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond})
		Expect(err).NotTo(HaveOccurred())
		pctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- plugin.Start(pctx) }()
		DeferCleanup(func() { cancel(); Eventually(done).Should(Receive(BeNil())) })
		opts := testAgentOptions
		opts.NRI = plugin
		startAgent(nodeName, newScriptedEngine(nil), withOptions(opts))

		expectNRI := func(state string, status metav1.ConditionStatus, reason string) {
			GinkgoHelper()
			Eventually(func(g Gomega) {
				var rep numav1.NumaNodeReport
				g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: nodeName}, &rep)).To(Succeed())
				g.Expect(rep.Status.NRI).To(Equal(state))
				c := meta.FindStatusCondition(rep.Status.Conditions, numav1.ConditionNRIConnected)
				g.Expect(c).NotTo(BeNil(), "the NRIConnected condition")
				g.Expect(c.Status).To(Equal(status))
				g.Expect(c.Reason).To(Equal(reason))
				var node corev1.Node
				g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: nodeName}, &node)).To(Succeed())
				g.Expect(node.Labels).To(HaveKeyWithValue(LabelNRI, strings.ToLower(state)))
			}).Should(Succeed())
		}
		expectNRI(numav1.NRIDisconnected, metav1.ConditionFalse, numav1.ReasonNRINotConnected)
		runtime.Start()
		expectNRI(numav1.NRIConnected, metav1.ConditionTrue, numav1.ReasonNRIConnected)
		runtime.Stop() // a runtime restart, or containerd stopped
		expectNRI(numav1.NRIDisconnected, metav1.ConditionFalse, numav1.ReasonNRINotConnected)
	})
})

// noPlacer places nothing.
type noPlacer struct{}

func (noPlacer) PlaceAtStart(context.Context, nri.Start) {}

func (noPlacer) PolicyAtCreation(context.Context, nri.Start) *mempolicy.OCIPolicy { return nil }

// connectPlugin starts a runtime (nri's adaptation, in this process) and the agent's NRI
// plugin with placer, connected to it until the spec ends.
func connectPlugin(placer nri.Placer) *nriruntime.Runtime {
	GinkgoHelper()
	runtime := nriruntime.Start(GinkgoTB())
	plugin, err := nri.New(nri.Config{Socket: runtime.Socket, Log: log.Log.WithName("nri"), Placer: placer})
	Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- plugin.Start(ctx) }()
	DeferCleanup(func() { cancel(); Eventually(done).Should(Receive(BeNil())) })
	runtime.WaitPlugin()
	return runtime
}

// startContainer has runtime start container main of pod, its init task pid: the
// runtime's StartContainer, whose sandbox carries the pod's metadata and labels.
func startContainer(runtime *nriruntime.Runtime, pod *corev1.Pod, id string, pid int) {
	GinkgoHelper()
	sandbox := &api.PodSandbox{Id: "sandbox-" + pod.Name, Uid: string(pod.UID), Namespace: pod.Namespace, Name: pod.Name, Labels: pod.Labels}
	Expect(runtime.StartContainer(sandbox, &api.Container{Id: id, PodSandboxId: sandbox.Id, Name: "main",
		Pid: uint32(pid), State: api.ContainerState_CONTAINER_CREATED})).To(Succeed())
}
