// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build integration

package agent

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
	"k8s.io/utils/ptr"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/internal/nodeagent/devices/podresources"
	"github.com/numapref/numapref/internal/testutil/builders"
	"github.com/numapref/numapref/internal/testutil/hostlab"
	"github.com/numapref/numapref/internal/testutil/podresourcesfake"
)

// FollowDevices with the whole agent: the real engine and controllers, the emulated kernel
// on a fixture sysfs of two NUMA nodes, a kubelet's PodResources API served on a real gRPC
// socket (the fake plays the kubelet, whose answers the e2e reads for real), and the DRA
// devices' ResourceSlices and ResourceClaims on the real apiserver.
var _ = Describe("FollowDevices with the real engine", Ordered, func() {
	ctx := context.Background()
	const node = "node-devices"
	var (
		ns      string
		kubelet *podresourcesfake.Kubelet
		lab     *hostlab.Lab
		host    *realHost
		// workloads are the pods' workloads by name.
		workloads = map[string]*hostlab.Workload{}
	)

	BeforeAll(func() {
		sysRoot, err := hostlab.FakeNUMASysfs(GinkgoT().TempDir(), 2, 1)
		Expect(err).NotTo(HaveOccurred())
		kubelet, err = podresourcesfake.Serve(GinkgoT().TempDir())
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(kubelet.Stop)
		host = newRealHost(node, sysRoot)
		client, err := podresources.New(kubelet.Socket, NewDRATopology(env.Client, node, nil), nil)
		Expect(err).NotTo(HaveOccurred())
		host.devices = client
		host.start(env.Config, 0)
		lab = host.lab
		ns = env.NewNamespace(ctx)
		Expect(env.Client.Create(ctx, builders.MakePreference(ns, "gpu").Selector("app", "gpu").Mode(numav1.PlacementModeFollowDevices).Obj())).To(Succeed())
		nic := builders.MakePreference(ns, "nic").Selector("app", "nic").Mode(numav1.PlacementModeFollowDevices).Obj()
		nic.Spec.Devices = &numav1.DeviceSelection{DeviceClassNames: []string{"nic.example.com"}}
		Expect(env.Client.Create(ctx, nic)).To(Succeed())
	})

	// start runs pod name (labels app=app) with the kubelet answering containers for it.
	start := func(name, app string, main *podresourcesv1.ContainerResources) (*corev1.Pod, *hostlab.Workload) {
		GinkgoHelper()
		main.Name = "main"
		pods := []*podresourcesv1.PodResources{{Namespace: ns, Name: name, Containers: []*podresourcesv1.ContainerResources{main}}}
		kubelet.SetPods(append(pods, podsOf(kubelet)...)...)
		w := startLabPod(ctx, lab, ns, node, name, map[string]string{"app": app}, 2)
		workloads[name] = w
		var pod corev1.Pod
		Expect(env.Client.Get(ctx, keyOf(ns, name), &pod)).To(Succeed())
		return &pod, w
	}
	nodesOf := func(g Gomega, pids ...int) []int { return emulatedNodes(g, host.emu, pids...) }

	It("places a pod on the node of its device plugin's device, node 1", func() {
		pod, w := start("gpu-0", "gpu", &podresourcesv1.ContainerResources{
			Devices: []*podresourcesv1.ContainerDevices{podresourcesfake.Device("example.com/gpu", "g0", 1)}})
		Eventually(func(g Gomega) { g.Expect(nodesOf(g, w.Pid())).To(HaveEach(1)) }).Should(Succeed())
		expectPodEvent(ctx, pod, numav1.ReasonApplied, "FollowDevices: 1 of 1 devices on node 1")
		Expect(kubelet.Gets.Load()).To(BeNumerically("==", 1), "one Get for the pod, not one per pass")
	})

	It("follows a DRA device of the classes it names, whose node its ResourceSlice says", func() {
		slice := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: node + "-nic"}, Spec: resourcev1.ResourceSliceSpec{
			Driver: "nic.example.com", NodeName: ptr.To(node), Pool: resourcev1.ResourcePool{Name: node, ResourceSliceCount: 1},
			Devices: []resourcev1.Device{{Name: "eth1", Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
				"nic.example.com/numaNode": {IntValue: ptr.To[int64](1)}}}}}}
		Expect(env.Client.Create(ctx, slice)).To(Succeed())
		DeferCleanup(func() { _ = env.Client.Delete(ctx, slice) })
		claim := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nic"}, Spec: resourcev1.ResourceClaimSpec{
			Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{Name: "port",
				Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "nic.example.com"}}}}}}
		Expect(env.Client.Create(ctx, claim)).To(Succeed())
		claim.Status.Allocation = &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{
			{Request: "port", Driver: "nic.example.com", Pool: node, Device: "eth1"}}}}
		Expect(env.Client.Status().Update(ctx, claim)).To(Succeed())

		// A GPU on node 0 too, which the preference does not follow.
		pod, w := start("nic-0", "nic", &podresourcesv1.ContainerResources{
			Devices: []*podresourcesv1.ContainerDevices{podresourcesfake.Device("example.com/gpu", "g1", 0)},
			DynamicResources: []*podresourcesv1.DynamicResource{{ClaimNamespace: ns, ClaimName: "nic", ClaimResources: []*podresourcesv1.ClaimResource{
				{DriverName: "nic.example.com", PoolName: node, DeviceName: "eth1"}}}}})
		Eventually(func(g Gomega) { g.Expect(nodesOf(g, w.Pid())).To(HaveEach(1)) }).Should(Succeed())
		expectPodEvent(ctx, pod, numav1.ReasonApplied, "nic.example.com (nic.example.com "+node+") eth1 on node 1")
	})

	It("gives its reason, and no node, to a device without topology and to one on a node the host lacks", func() {
		pod, w := start("bare-0", "gpu", &podresourcesv1.ContainerResources{
			Devices: []*podresourcesv1.ContainerDevices{podresourcesfake.Device("example.com/gpu", "g2")}})
		expectPodEvent(ctx, pod, numav1.ReasonDevicesWithoutTopology, "example.com/gpu g2 on no NUMA node")
		pod5, w5 := start("far-0", "gpu", &podresourcesv1.ContainerResources{
			Devices: []*podresourcesv1.ContainerDevices{podresourcesfake.Device("example.com/gpu", "g3", 5)}})
		expectPodEvent(ctx, pod5, numav1.ReasonNodeNotPresent, "example.com/gpu g3 on node 5")
		Expect(nodesOf(Default, w.Pid(), w5.Pid())).To(HaveEach(-1))
	})

	It("says the socket does not answer when the kubelet is gone, and keeps the placed pods where they are", func() {
		kubelet.Stop()
		pod, w := start("late-0", "gpu", &podresourcesv1.ContainerResources{
			Devices: []*podresourcesv1.ContainerDevices{podresourcesfake.Device("example.com/gpu", "g4", 1)}})
		expectPodEvent(ctx, pod, numav1.ReasonDeviceAllocationsUnreadable, "does not answer")
		host.engine.Pass()
		Expect(nodesOf(Default, w.Pid())).To(HaveEach(-1))
		Expect(nodesOf(Default, workloads["gpu-0"].Pid())).To(HaveEach(1), "a placed pod moved when the socket went")
	})
})

// podsOf are the pods the fake kubelet answers for.
func podsOf(k *podresourcesfake.Kubelet) []*podresourcesv1.PodResources {
	resp, _ := k.List(context.Background(), &podresourcesv1.ListPodResourcesRequest{})
	return resp.GetPodResources()
}
