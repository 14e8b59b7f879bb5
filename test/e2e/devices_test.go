// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/internal/inspect"
	"github.com/numapref/numapref/test/localnode"
)

// The FollowDevices specs need a host of more than one NUMA node, so that the node a pod
// follows is not node 0 by chance: the agent runs the emulated kernel on a fixture
// topology of two nodes (-numa-topology-root, written on every node), and the project's
// device driver (test/devicedriver) offers fake devices on chosen nodes to the node's
// real kubelet, through its device plugin API and its DRA plugin API; the real scheduler
// allocates them, the real kubelet reports them on its PodResources socket.
const (
	devicesNS    = "numapref-e2e-devices"
	topologyRoot = "/run/numapref-e2e-topology"
	nicClass     = "nic.example.com"
)

// The fake devices the device plugin offers: resource → "device:node" (no node: no
// topology). A pod asking for all of a resource gets all of its devices.
var pluginResources = map[string]string{
	"example.com/gpu":  "g0:1",           // one GPU, on node 1
	"example.com/span": "s0:0,s1:1,s2:1", // three spanning both nodes, most on 1
	"example.com/bare": "b0:",            // no topology
	"example.com/far":  "f0:7",           // a node the host does not have
}

var _ = Describe("FollowDevices: the node of the devices the kubelet allocated", Ordered, Label("devices"), func() {
	var cl client.Client

	BeforeAll(func(ctx SpecContext) {
		cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		Expect(err).NotTo(HaveOccurred())
		cl = newClient(cfg)
		for _, n := range prov.nodes() {
			out, err := prov.nodeShell(ctx, n, twoNodeTopologyScript(topologyRoot))
			Expect(err).NotTo(HaveOccurred(), out)
		}
		installAgent(ctx)
		emulateTopology(ctx, topologyRoot)
		deployDeviceDriver(ctx)
		makeInspector(ctx, devicesNS, "numapref-e2e-devices-inspector")
	}, NodeTimeout(6*time.Minute))

	AfterAll(func(ctx SpecContext) {
		_, _ = kubectl(ctx, "delete", "namespace", devicesNS, "--wait=true", "--timeout=90s")
		_, _ = kubectl(ctx, "delete", "deviceclass", nicClass, "--ignore-not-found")
		_, _ = kubectl(ctx, "delete", "clusterrolebinding", "numapref-e2e-dra", "numapref-e2e-devices-inspector", "--ignore-not-found")
		_, _ = kubectl(ctx, "delete", "clusterrole", "numapref-e2e-dra", "--ignore-not-found")
		_, _ = kubectl(ctx, "delete", "resourceslices", "--all")
		uninstallAgent(ctx)
		for _, n := range prov.nodes() {
			_, _ = prov.nodeShell(ctx, n, "rm -rf "+topologyRoot)
		}
	}, NodeTimeout(4*time.Minute))

	// devicePod runs a workload that asks for resources (name → count) and claims.
	devicePod := func(ctx SpecContext, name string, labels, annotations map[string]string, limits map[string]int64, claim string) string {
		GinkgoHelper()
		p := workloadPodOn(primaryNode(), devicesNS, name, labels, annotations, "main")
		p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{}
		for r, n := range limits {
			p.Spec.Containers[0].Resources.Limits[corev1.ResourceName(r)] = *resource.NewQuantity(n, resource.DecimalSI)
		}
		if claim != "" {
			p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "nic", ResourceClaimName: &claim}}
			p.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "nic"}}
		}
		Expect(cl.Create(ctx, p)).To(Succeed())
		return containerIDs(ctx, cl, devicesNS, name)["main"]
	}
	event := func(ctx SpecContext, pod, reason, text string) {
		GinkgoHelper()
		Eventually(func(g Gomega) {
			out, err := kubectl(ctx, "get", "events", "-n", devicesNS, "--field-selector", "involvedObject.name="+pod+",reason="+reason)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(out).To(ContainSubstring(text))
		}).WithContext(ctx).WithTimeout(45 * time.Second).Should(Succeed())
	}

	It("places a pod on node 1, the node of its device plugin's GPU, and inspect shows the device", func(ctx SpecContext) {
		applyPreferenceIn(ctx, devicesNS, "e2e-gpu", "mode: FollowDevices\n  devices: {resourceNames: [example.com/gpu]}")
		id := devicePod(ctx, "gpu", map[string]string{"app": "e2e-gpu"}, nil, map[string]int64{"example.com/gpu": 1}, "")
		Eventually(allPrefer(ctx, id, 1, 9)).WithContext(ctx).WithTimeout(45 * time.Second).Should(Succeed())
		event(ctx, "gpu", numav1.ReasonApplied, "FollowDevices: 1 of 1 devices on node 1 (example.com/gpu g0 on node 1)")

		args := []string{"inspect", devicesNS + "/gpu", "--token-service-account", devicesNS + "/e2e-inspector"}
		if u := prov.agentURL(); u != "" {
			args = append(args, "--agent-url", u)
		}
		var pod inspect.Pod
		Eventually(func(g Gomega) {
			out, err := run(ctx, "", plugin, append(args, "-o", "json")...)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(json.Unmarshal([]byte(out), &pod)).To(Succeed())
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
		Expect(pod.Containers).To(HaveLen(1))
		Expect(pod.Containers[0].Devices).To(Equal([]inspect.Device{{ResourceName: "example.com/gpu", ID: "g0", Nodes: []int{1}}}))
		out, err := run(ctx, "", plugin, args...)
		Expect(err).NotTo(HaveOccurred())
		Expect(out).To(ContainSubstring("main: devices followed: example.com/gpu g0 on node 1"))

		// status: what the preference follows, and its pod counted on NUMA node 1.
		Eventually(func(g Gomega) {
			out, err := run(ctx, "", plugin, "status", devicesNS+"/e2e-gpu", "--all-nodes")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(out).To(ContainSubstring("(FollowDevices, following resources example.com/gpu)"))
			g.Expect(out).To(MatchRegexp(`(?m)^` + primaryNode() + `\s+1\s+1\s+\d+\s+1:1\s`))
		}).WithContext(ctx).WithTimeout(60 * time.Second).Should(Succeed())
	}, SpecTimeout(3*time.Minute))

	It("places a pod on node 1, the node of its DRA claim's NIC, through the annotations", func(ctx SpecContext) {
		out, err := kubectlIn(ctx, fmt.Sprintf(`apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: nic, namespace: %s}
spec:
  devices:
    requests:
    - name: port
      exactly:
        deviceClassName: %s
        selectors:
        - cel: {expression: 'device.attributes["%s"].numaNode == 1'}
`, devicesNS, nicClass, nicClass), "apply", "-f", "-")
		Expect(err).NotTo(HaveOccurred(), out)
		id := devicePod(ctx, "nic", nil, map[string]string{numav1.AnnotationPreferredNode: "FollowDevices",
			numav1.AnnotationFollowDeviceClassNames: nicClass}, nil, "nic")
		Eventually(allPrefer(ctx, id, 1, 9)).WithContext(ctx).WithTimeout(45 * time.Second).Should(Succeed())
		event(ctx, "nic", numav1.ReasonApplied, "FollowDevices: 1 of 1 devices on node 1 ("+nicClass+" ("+nicClass+" "+primaryNode()+") eth1 on node 1)")
	}, SpecTimeout(3*time.Minute))

	It("takes the node with most devices when they span nodes", func(ctx SpecContext) {
		applyPreferenceIn(ctx, devicesNS, "e2e-span", "mode: FollowDevices")
		id := devicePod(ctx, "span", map[string]string{"app": "e2e-span"}, nil, map[string]int64{"example.com/span": 3}, "")
		Eventually(allPrefer(ctx, id, 1, 9)).WithContext(ctx).WithTimeout(45 * time.Second).Should(Succeed())
		event(ctx, "span", numav1.ReasonApplied, "FollowDevices: 2 of 3 devices on node 1, the most of nodes 0-1")
	}, SpecTimeout(3*time.Minute))

	It("gives no node, and a Warning with its reason, to a device without topology and to one on a node the host lacks", func(ctx SpecContext) {
		applyPreferenceIn(ctx, devicesNS, "e2e-bad", "mode: FollowDevices")
		bare := devicePod(ctx, "bare", map[string]string{"app": "e2e-bad"}, nil, map[string]int64{"example.com/bare": 1}, "")
		far := devicePod(ctx, "far", map[string]string{"app": "e2e-bad"}, nil, map[string]int64{"example.com/far": 1}, "")
		event(ctx, "bare", numav1.ReasonDevicesWithoutTopology, "example.com/bare b0 on no NUMA node")
		event(ctx, "far", numav1.ReasonNodeNotPresent, "example.com/far f0 on node 7")
		for _, id := range []string{bare, far} {
			Consistently(allPrefer(ctx, id, -1, 1)).WithContext(ctx).WithTimeout(3*time.Second).Should(Succeed(), "a guess")
		}
		// status counts both reasons as the node's problems.
		Eventually(func(g Gomega) {
			out, err := run(ctx, "", plugin, "status", devicesNS+"/e2e-bad")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(out).To(ContainSubstring("(FollowDevices, following every device)"))
			g.Expect(out).To(MatchRegexp(`(?m)^` + primaryNode() + `\s.*DevicesWithoutTopology 1`))
			g.Expect(out).To(MatchRegexp(`(?m)^` + primaryNode() + `\s.*NodeNotPresent 1`))
		}).WithContext(ctx).WithTimeout(60 * time.Second).Should(Succeed())
	}, SpecTimeout(3*time.Minute))

	It("says the kubelet's socket is unreadable, then absent, on new pods, and keeps the placed ones", func(ctx SpecContext) {
		socket := filepath.Join(prov.kubeletDir(), "pod-resources", "kubelet.sock")
		// Unreadable: the agent runs as root without CAP_DAC_OVERRIDE, so a socket of mode
		// 000 refuses its connect. Then absent: moved aside. The kubelet serves on its open
		// socket meanwhile (a connection made before would still be answered: the agent
		// makes one per read); both are put back.
		mode, err := nodeShell(ctx, "stat -c %a "+socket)
		Expect(err).NotTo(HaveOccurred(), mode)
		mode = strings.TrimSpace(mode)
		for _, fault := range []struct{ name, break_, mend, says string }{
			{"denied", "chmod 000 " + socket, "chmod " + mode + " " + socket, "refused the agent"},
			{"absent", "mv " + socket + " " + socket + ".aside", "mv " + socket + ".aside " + socket, "does not answer"},
		} {
			out, err := nodeShell(ctx, fault.break_)
			Expect(err).NotTo(HaveOccurred(), out)
			DeferCleanup(func(ctx SpecContext) { _, _ = nodeShell(ctx, fault.mend) })
			name := "late-" + fault.name
			id := devicePod(ctx, name, map[string]string{"app": "e2e-gpu"}, nil, nil, "")
			event(ctx, name, numav1.ReasonDeviceAllocationsUnreadable, fault.says)
			Consistently(allPrefer(ctx, id, -1, 1)).WithContext(ctx).WithTimeout(2*time.Second).Should(Succeed(), "placed without its devices")
			out, err = nodeShell(ctx, fault.mend)
			Expect(err).NotTo(HaveOccurred(), out)
		}
		// The pods placed before keep their node (the agent kept their devices).
		pods := &corev1.PodList{}
		Expect(cl.List(ctx, pods, client.InNamespace(devicesNS), client.MatchingLabels{"app": "e2e-span"})).To(Succeed())
		Expect(pods.Items).To(HaveLen(1))
		Eventually(allPrefer(ctx, pods.Items[0].Status.ContainerStatuses[0].ContainerID, 1, 9)).WithContext(ctx).Should(Succeed())
	}, SpecTimeout(3*time.Minute))
})

// twoNodeTopologyScript writes, under root, a sysfs-like tree of two NUMA nodes (CPU 0 on
// node 0, CPU 1 on node 1, 4 GiB each) for the agent's -numa-topology-root.
func twoNodeTopologyScript(root string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "set -e\nr=%s/devices/system\nmkdir -p $r/cpu $r/node/node0 $r/node/node1\n", root)
	for file, content := range map[string]string{
		"node/online": "0-1", "node/possible": "0-1", "node/has_cpu": "0-1", "node/has_memory": "0-1",
		"cpu/online": "0-1", "cpu/possible": "0-1",
		"node/node0/cpulist": "0", "node/node0/distance": "10 20",
		"node/node0/meminfo": "Node 0 MemTotal: 4194304 kB\nNode 0 MemFree: 2097152 kB",
		"node/node1/cpulist": "1", "node/node1/distance": "20 10",
		"node/node1/meminfo": "Node 1 MemTotal: 4194304 kB\nNode 1 MemFree: 2097152 kB",
	} {
		fmt.Fprintf(&b, "printf '%%s\\n' '%s' > $r/%s\n", strings.ReplaceAll(content, "\n", "' '"), file)
	}
	return b.String()
}

// emulateTopology has the installed agents read the NUMA topology under root (the fixture
// twoNodeTopologyScript wrote on every node) and waits for them.
func emulateTopology(ctx context.Context, root string) {
	GinkgoHelper()
	patch := fmt.Sprintf(`[
  {"op": "add", "path": "/spec/template/spec/containers/0/args/-", "value": "--numa-topology-root=%[1]s"},
  {"op": "add", "path": "/spec/template/spec/volumes/-", "value": {"name": "e2e-topology", "hostPath": {"path": %[1]q, "type": "Directory"}}},
  {"op": "add", "path": "/spec/template/spec/containers/0/volumeMounts/-", "value": {"name": "e2e-topology", "mountPath": %[1]q, "readOnly": true}}
]`, root)
	out, err := kubectl(ctx, "patch", "daemonset", release+"-agent", "-n", agentNamespace, "--type=json", "-p", patch)
	Expect(err).NotTo(HaveOccurred(), out)
	out, err = kubectl(ctx, "rollout", "status", "daemonset/"+release+"-agent", "-n", agentNamespace, "--timeout=3m")
	Expect(err).NotTo(HaveOccurred(), out)
	Eventually(func(g Gomega) {
		out, err := kubectl(ctx, "get", "node", primaryNode(), "-o", "jsonpath={.metadata.labels.numapref\\.io/numa-nodes}")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(out).To(Equal("2"))
	}).WithContext(ctx).WithTimeout(60 * time.Second).Should(Succeed())
}

// value is the provider's chart value key (key=value in prov.values()).
func value(key string) string {
	GinkgoHelper()
	for _, v := range prov.values() {
		if k, val, ok := strings.Cut(v, "="); ok && k == key {
			return val
		}
	}
	Fail("the provider sets no chart value " + key)
	return ""
}

// deployDeviceDriver runs the device plugin and the DRA driver on the primary node, makes
// the DRA DeviceClass, and waits until the kubelet offers their devices.
func deployDeviceDriver(ctx context.Context) {
	GinkgoHelper()
	var resources []string
	for r, devs := range pluginResources {
		resources = append(resources, fmt.Sprintf("--resource=%s=%s", r, devs))
	}
	args, err := json.Marshal(append([]string{"device-plugin"}, resources...))
	Expect(err).NotTo(HaveOccurred())
	manifest := fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata: {name: %[1]s}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: dra, namespace: %[1]s}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: numapref-e2e-dra}
rules:
- {apiGroups: [resource.k8s.io], resources: [resourceslices], verbs: [get, list, watch, create, update, delete]}
- {apiGroups: [resource.k8s.io], resources: [resourceclaims], verbs: [get]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: numapref-e2e-dra}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: numapref-e2e-dra}
subjects: [{kind: ServiceAccount, name: dra, namespace: %[1]s}]
---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: %[2]s}
spec:
  selectors:
  - cel: {expression: 'device.driver == "%[2]s"'}
---
apiVersion: v1
kind: Pod
metadata: {name: device-plugin, namespace: %[1]s}
spec:
  nodeName: %[3]s
  tolerations: [{operator: Exists}]
  containers:
  - name: plugin
    image: %[4]s
    imagePullPolicy: Never
    args: %[5]s
    volumeMounts: [{name: plugins, mountPath: /var/lib/kubelet/device-plugins}]
  volumes: [{name: plugins, hostPath: {path: /var/lib/kubelet/device-plugins, type: Directory}}]
---
apiVersion: v1
kind: Pod
metadata: {name: dra-driver, namespace: %[1]s}
spec:
  nodeName: %[3]s
  serviceAccountName: dra
  # As the agent: on the host network, it reaches the API server where the nodes do (these
  # clusters run no kube-proxy).
  hostNetwork: true
  tolerations: [{operator: Exists}]
  containers:
  - name: driver
    image: %[4]s
    imagePullPolicy: Never
    args: [dra, "--driver=%[2]s", "--devices=eth0:0,eth1:1", "--node=%[3]s", "--kubelet-dir=%[6]s"]
    env: [{name: KUBERNETES_SERVICE_HOST, value: %[7]q}, {name: KUBERNETES_SERVICE_PORT, value: %[8]q}]
    volumeMounts:
    - {name: registry, mountPath: %[6]s/plugins_registry}
    - {name: plugins, mountPath: %[6]s/plugins}
  volumes:
  - {name: registry, hostPath: {path: %[6]s/plugins_registry, type: DirectoryOrCreate}}
  - {name: plugins, hostPath: {path: %[6]s/plugins, type: DirectoryOrCreate}}
`, devicesNS, nicClass, primaryNode(), localnode.DeviceDriverImage, args, prov.kubeletDir(), value("apiServer.host"), value("apiServer.port"))
	out, err := kubectlIn(ctx, manifest, "apply", "-f", "-")
	Expect(err).NotTo(HaveOccurred(), out)
	Eventually(func(g Gomega) {
		node := &corev1.Node{}
		out, err := kubectl(ctx, "get", "node", primaryNode(), "-o", "json")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(json.Unmarshal([]byte(out), node)).To(Succeed())
		for r := range pluginResources {
			q := node.Status.Allocatable[corev1.ResourceName(r)]
			g.Expect(q.Value()).To(BeNumerically(">", 0), "allocatable %s", r)
		}
		out, err = kubectl(ctx, "get", "resourceslices", "-o", "name")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(out).To(ContainSubstring(primaryNode() + "-" + nicClass))
	}).WithContext(ctx).WithTimeout(90*time.Second).Should(Succeed(), "the kubelet offers the fake devices")
}
