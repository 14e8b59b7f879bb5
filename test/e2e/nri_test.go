//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/test/localnode"
)

// The agent as the container runtime's NRI plugin, on a node whose containerd serves NRI
// (make e2e-nri: the local node on containerd 2.x built by hack/runtime-binaries.sh). Each
// workload's first action reports its own forced node, read from the emulator's view: a
// container placed after it started would report -1.
var _ = Describe("Placing containers at their start through the runtime's NRI", Ordered, Label("nri"), func() {
	const nns = "e2e-nri"
	var cl client.Client

	BeforeAll(func(ctx SpecContext) {
		if !prov.nri() {
			Fail("the specs labelled nri need a runtime with NRI: make e2e-nri")
		}
		cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		Expect(err).NotTo(HaveOccurred())
		cl = newClient(cfg)
		out, err := kubectl(ctx, "create", "namespace", nns)
		Expect(err).NotTo(HaveOccurred(), out)
	})

	AfterAll(func(ctx SpecContext) {
		_, _ = kubectl(ctx, "delete", "namespace", nns, "--wait=true", "--timeout=90s")
		if _, err := helm(ctx, "status", release, "-n", agentNamespace); err == nil {
			uninstallAgent(ctx)
		}
	}, NodeTimeout(3*time.Minute))

	It("registers with the runtime: the node's report and label say so", func(ctx SpecContext) {
		installAgent(ctx)
		Eventually(func(g Gomega) {
			var rep numav1.NumaNodeReport
			g.Expect(cl.Get(ctx, client.ObjectKey{Name: primaryNode()}, &rep)).To(Succeed())
			g.Expect(rep.Status.NRI).To(Equal(numav1.NRIConnected))
			c := meta.FindStatusCondition(rep.Status.Conditions, numav1.ConditionNRIConnected)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
			node := &corev1.Node{}
			g.Expect(cl.Get(ctx, client.ObjectKey{Name: primaryNode()}, node)).To(Succeed())
			g.Expect(node.Labels).To(HaveKeyWithValue("numapref.io/nri", "connected"))
		}).WithContext(ctx).WithTimeout(60 * time.Second).Should(Succeed())
	}, SpecTimeout(3*time.Minute))

	It("gives a new pod's container its node before its first instruction, one pod and a burst of ten", func(ctx SpecContext) {
		applyPreferenceIn(ctx, nns, "first", "node: 0")
		Expect(cl.Create(ctx, firstNodePod(nns, "first-0"))).To(Succeed())
		Eventually(firstReports(ctx, cl, nns, "app=first", 1)).WithContext(ctx).WithTimeout(90 * time.Second).Should(Succeed())

		// Ten replicas at once: the kubelet's status updates queue up, the runtime's
		// StartContainer does not wait for them.
		tmpl := firstNodePod(nns, "")
		dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "first-burst", Namespace: nns}}
		dep.Spec.Replicas = ptr(int32(10))
		dep.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "first", "burst": "yes"}}
		dep.Spec.Template.Labels = map[string]string{"app": "first", "burst": "yes"}
		dep.Spec.Template.Spec = tmpl.Spec
		Expect(cl.Create(ctx, dep)).To(Succeed())
		Eventually(firstReports(ctx, cl, nns, "burst=yes", 10)).WithContext(ctx).WithTimeout(3 * time.Minute).Should(Succeed())

		// The node's report counts them as placed at their start.
		Eventually(func(g Gomega) {
			var rep numav1.NumaNodeReport
			g.Expect(cl.Get(ctx, client.ObjectKey{Name: primaryNode()}, &rep)).To(Succeed())
			var entry *numav1.PreferenceReport
			for i := range rep.Status.Preferences {
				if p := &rep.Status.Preferences[i]; p.Namespace == nns && p.Name == "first" {
					entry = p
				}
			}
			g.Expect(entry).NotTo(BeNil(), "the report's entry for NumaPreference first")
			g.Expect(entry.Containers).To(BeEquivalentTo(11))
			g.Expect(entry.PlacedAtStart).To(BeEquivalentTo(11))
		}).WithContext(ctx).WithTimeout(60 * time.Second).Should(Succeed())
	}, SpecTimeout(6*time.Minute))
})

// firstNodePod is a pod in namespace whose container reports its forced node first
// (workload first-node), from the emulator's view of the node (hostPID: the view is by
// host pid; mounted read-only).
func firstNodePod(namespace, name string) *corev1.Pod {
	p := workloadPodOn(primaryNode(), namespace, name, map[string]string{"app": "first"}, nil, "main")
	p.Spec.HostPID = true
	p.Spec.Containers[0].Args = []string{"first-node", "-view", "/emulator/proc", "-threads", "2"}
	p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "emulator", MountPath: "/emulator", ReadOnly: true}}
	p.Spec.Volumes = []corev1.Volume{{Name: "emulator", VolumeSource: corev1.VolumeSource{
		HostPath: &corev1.HostPathVolumeSource{Path: strings.TrimSuffix(emulatorView, "/proc")}}}}
	return p
}

// firstReports checks that n running pods in namespace match sel and that each one's
// container printed "first-node 0" as its first line.
func firstReports(ctx context.Context, cl client.Client, namespace, sel string, n int) func(Gomega) {
	return func(g Gomega) {
		var pods corev1.PodList
		g.Expect(cl.List(ctx, &pods, client.InNamespace(namespace), client.MatchingLabels(labelsOf(sel)))).To(Succeed())
		g.Expect(pods.Items).To(HaveLen(n))
		for _, p := range pods.Items {
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning), p.Name)
			out, err := kubectl(ctx, "logs", "-n", namespace, p.Name, "-c", "main")
			g.Expect(err).NotTo(HaveOccurred())
			first, _, _ := strings.Cut(out, "\n")
			g.Expect(first).To(Equal("first-node 0"), fmt.Sprintf("pod %s's first report (image %s)", p.Name, localnode.WorkloadImage))
		}
	}
}
