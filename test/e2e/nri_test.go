// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/test/localnode"
)

// The agent as the container runtime's NRI plugin, on a node whose containerd serves NRI
// (make e2e-nri: the local node on containerd 2.x built by hack/runtime-binaries.sh; make
// e2e-kind: the kind nodes, on the same containerd, all but the localnode spec). Each
// workload's first action reports its own forced node, read from the emulator's view: a
// container placed after it started would report -1.
var _ = Describe("Placing containers at their start through the runtime's NRI", Ordered, Label("nri"), func() {
	const nns = "e2e-nri"
	var cl client.Client

	BeforeAll(func(ctx SpecContext) { cl = nriNamespace(ctx, nns, "make e2e-nri") })
	AfterAll(func(ctx SpecContext) { nriCleanup(ctx, nns) }, NodeTimeout(5*time.Minute))

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
		Expect(cl.Create(ctx, firstNodePod(nns, "first-0", map[string]string{"app": "first"}))).To(Succeed())
		Eventually(firstReports(ctx, cl, nns, "app=first", 1)).WithContext(ctx).WithTimeout(90 * time.Second).Should(Succeed())

		// Ten replicas at once: the kubelet's status updates queue up, the runtime's
		// StartContainer does not wait for them.
		Expect(cl.Create(ctx, firstNodeDeployment(nns, "first-burst", 10, map[string]string{"app": "first", "burst": "yes"}))).To(Succeed())
		Eventually(firstReports(ctx, cl, nns, "burst=yes", 10)).WithContext(ctx).WithTimeout(3 * time.Minute).Should(Succeed())

		// The node's report counts them as placed at their start.
		Eventually(func(g Gomega) {
			var rep numav1.NumaNodeReport
			g.Expect(cl.Get(ctx, client.ObjectKey{Name: primaryNode()}, &rep)).To(Succeed())
			entry := reportEntry(&rep, nns, "first")
			g.Expect(entry).NotTo(BeNil(), "the report's entry for NumaPreference first")
			g.Expect(entry.Containers).To(BeEquivalentTo(11))
			g.Expect(entry.PlacedAtStart).To(BeEquivalentTo(11))
		}).WithContext(ctx).WithTimeout(60 * time.Second).Should(Succeed())
	}, SpecTimeout(6*time.Minute))

	It("creates a selected container with the memory policy of its home, real on this kernel, and leaves an unselected one without", func(ctx SpecContext) {
		applyPreferenceIn(ctx, nns, "policy", "node: 0\n  memoryPolicy: AtCreation")
		Expect(cl.Create(ctx, firstNodePod(nns, "policy-0", map[string]string{"app": "policy"}))).To(Succeed())
		Expect(cl.Create(ctx, firstNodePod(nns, "unselected-0", map[string]string{"app": "unselected"}))).To(Succeed())

		// The policy as the kernel spells it: MPOL_PREFERRED_MANY with balancing where the
		// kernel takes it (6.10 and later), MPOL_PREFERRED before.
		const home = `prefer( \(many\)=balancing)?:0`
		// Its first instruction reads it with get_mempolicy(2), the workload's second line.
		Eventually(func(g Gomega) {
			for name, out := range runningLogs(ctx, g, cl, nns, "app=policy", 1) {
				g.Expect(out).To(MatchRegexp(`(?m)^first-policy `+home+`$`), "pod %s's own memory policy at its first instruction", name)
			}
			for name, out := range runningLogs(ctx, g, cl, nns, "app=unselected", 1) {
				g.Expect(out).To(MatchRegexp(`(?m)^first-policy default$`), "pod %s's own memory policy at its first instruction", name)
			}
		}).WithContext(ctx).WithTimeout(90 * time.Second).Should(Succeed())

		// The node's /proc says the same of the init and of a child it forks (fork() resets
		// the preferred node, never the memory policy).
		id := containerIDs(ctx, cl, nns, "policy-0")["main"]
		signalWorkload(ctx, id, "USR1")
		Eventually(func(g Gomega) {
			tasks, err := containerTasks(ctx, id)
			g.Expect(err).NotTo(HaveOccurred())
			pids := processes(tasks)
			g.Expect(pids).To(HaveLen(2), "the init and its forked child")
			for _, pid := range pids {
				g.Expect(numaMapsPolicy(ctx, pid)).To(MatchRegexp(`^`+home+`$`), "process %d", pid)
			}
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
		unselected, err := containerTasks(ctx, containerIDs(ctx, cl, nns, "unselected-0")["main"])
		Expect(err).NotTo(HaveOccurred())
		Expect(numaMapsPolicy(ctx, slices.Min(processes(unselected)))).To(Equal("default"))

		// The node's report says which mechanisms acted, and its label that it offers one.
		Eventually(func(g Gomega) {
			var rep numav1.NumaNodeReport
			g.Expect(cl.Get(ctx, client.ObjectKey{Name: primaryNode()}, &rep)).To(Succeed())
			g.Expect(rep.Status.Mechanisms).To(ContainElement("memoryPolicy"))
			entry := reportEntry(&rep, nns, "policy")
			g.Expect(entry).NotTo(BeNil(), "the report's entry for NumaPreference policy")
			g.Expect(entry.Containers).To(BeEquivalentTo(1))
			g.Expect(entry.MemoryPolicy).To(BeEquivalentTo(1))
			node := &corev1.Node{}
			g.Expect(cl.Get(ctx, client.ObjectKey{Name: primaryNode()}, node)).To(Succeed())
			g.Expect(node.Labels).To(HaveKeyWithValue("numapref.io/memory-policy", "available"))
			// The status adds it up.
			np := &numav1.NumaPreference{}
			g.Expect(cl.Get(ctx, client.ObjectKey{Namespace: nns, Name: "policy"}, np)).To(Succeed())
			g.Expect(np.Status.Summary.MemoryPolicy).To(BeEquivalentTo(1))
		}).WithContext(ctx).WithTimeout(60 * time.Second).Should(Succeed())
	}, SpecTimeout(4*time.Minute))

	It("connects again after the runtime restarts, and places the next pod at its start", func(ctx SpecContext) {
		connects := func() int {
			out, err := kubectl(ctx, "logs", "-n", agentNamespace, "-l", "app.kubernetes.io/name=numapref,app.kubernetes.io/component=agent",
				"-c", "agent", "--tail=-1")
			Expect(err).NotTo(HaveOccurred(), out)
			return strings.Count(out, "NRI runtime connected")
		}
		before := connects()
		Expect(before).To(BeNumerically(">=", 1))
		// containerd stops and starts again; the containers and their shims keep running.
		Expect(prov.restartRuntime(ctx)).To(Succeed())
		Eventually(connects).WithContext(ctx).WithTimeout(60*time.Second).Should(BeNumerically(">", before),
			"the agent registers with the new containerd")
		Expect(cl.Create(ctx, firstNodePod(nns, "first-after-restart", map[string]string{"app": "first"}))).To(Succeed())
		Eventually(firstReports(ctx, cl, nns, "app=first,!burst", 2)).WithContext(ctx).WithTimeout(90 * time.Second).Should(Succeed())
	}, SpecTimeout(4*time.Minute))

	It("places every container that starts while its agent restarts", func(ctx SpecContext) {
		Expect(cl.Create(ctx, firstNodeDeployment(nns, "first-restart", 10, map[string]string{"app": "first", "burst": "restart"}, "-await"))).To(Succeed())
		// The agent goes while the containers start: some start with no plugin registered.
		out, err := kubectl(ctx, "delete", "pod", "-n", agentNamespace, "-l", "app.kubernetes.io/name=numapref,app.kubernetes.io/component=agent", "--wait=false")
		Expect(err).NotTo(HaveOccurred(), out)
		out, err = kubectl(ctx, "rollout", "status", "daemonset", "-n", agentNamespace, "--timeout=120s")
		Expect(err).NotTo(HaveOccurred(), out)
		// Each is placed: at its start, or after it by the new agent (the API path, a rescan).
		Eventually(func(g Gomega) {
			for name, out := range runningLogs(ctx, g, cl, nns, "burst=restart", 10) {
				g.Expect(out).To(MatchRegexp(`(?m)^placed-after-ms [0-9.]+$`), "pod %s placed", name)
			}
		}).WithContext(ctx).WithTimeout(2 * time.Minute).Should(Succeed())
		// The node's report: registered again, every container of the preference placed
		// (the 12 of the specs before, these 10), none skipped or refused.
		Eventually(func(g Gomega) {
			var rep numav1.NumaNodeReport
			g.Expect(cl.Get(ctx, client.ObjectKey{Name: primaryNode()}, &rep)).To(Succeed())
			g.Expect(rep.Status.NRI).To(Equal(numav1.NRIConnected))
			entry := reportEntry(&rep, nns, "first")
			g.Expect(entry).NotTo(BeNil(), "the report's entry for NumaPreference first")
			g.Expect(entry.Containers).To(BeEquivalentTo(22))
			g.Expect(entry.Skipped).To(BeEmpty())
			g.Expect(entry.Failed).To(BeEmpty())
		}).WithContext(ctx).WithTimeout(60 * time.Second).Should(Succeed())
	}, SpecTimeout(5*time.Minute))
	// On the local node only (label localnode): it pauses kube-apiserver, a process of the
	// node, and runs a static pod from the kubelet's manifest directory.
	It("places a new pod's container at its start while the API server is unreachable, and keeps it placed", Label("localnode"), func(ctx SpecContext) {
		node := prov.(*localProvider).node
		// A start the API cannot confirm holds for the start grace of the API answering
		// (--nri-start-grace): shorter here than its default, so that the outage outlasts it,
		// and long enough for the kubelet, once the API is back, to make its mirror pod and
		// post the container's status: it makes the mirror pod at the static pod's next sync,
		// within its syncFrequency (1 min), 36 s to over 45 s after the API came back here.
		const grace = 90 * time.Second
		out, err := helm(ctx, "upgrade", release, "../../charts/numapref", "-n", agentNamespace, "--reuse-values",
			"--set", fmt.Sprintf("nri.startGrace=%s", grace), "--wait", "--timeout", "2m")
		Expect(err).NotTo(HaveOccurred(), out)
		out, err = kubectl(ctx, "rollout", "status", "daemonset", "-n", agentNamespace, "--timeout=120s")
		Expect(err).NotTo(HaveOccurred(), out)
		first := func(g Gomega) numav1.PreferenceReport {
			var rep numav1.NumaNodeReport
			g.Expect(cl.Get(ctx, client.ObjectKey{Name: primaryNode()}, &rep)).To(Succeed())
			g.Expect(rep.Status.NRI).To(Equal(numav1.NRIConnected))
			entry := reportEntry(&rep, nns, "first")
			g.Expect(entry).NotTo(BeNil(), "the report's entry for NumaPreference first")
			return *entry
		}
		// The agent restarted with the upgrade, and it reports before its first pass has
		// counted the containers (an entry of 0): the counts to compare with are those of
		// every running pod the preference selects.
		var before numav1.PreferenceReport
		Eventually(func(g Gomega) {
			before = first(g)
			running := runningPods(ctx, g, cl, nns, client.MatchingLabels{"app": "first"})
			g.Expect(before.Containers).To(BeEquivalentTo(running), "the restarted agent's count of the preference's running containers")
		}).WithContext(ctx).WithTimeout(60 * time.Second).Should(Succeed())

		// The partition: kube-apiserver answers nothing, and the agent notices (its log, read
		// from the kubelet's files: kubectl logs needs the API).
		unreachable := func() int { return strings.Count(prov.agentLogs(ctx), "The API server does not answer") }
		noticed := unreachable()
		Expect(node.PauseAPIServer()).To(Succeed())
		DeferCleanup(node.ResumeAPIServer)
		Eventually(unreachable).WithContext(ctx).WithTimeout(2*time.Minute).WithPolling(time.Second).
			Should(BeNumerically(">", noticed), "the agent says the API does not answer")

		// The kubelet runs a new pod from its own manifest (a static pod), which needs no API.
		pod := firstNodePod(nns, "outage", map[string]string{"app": "first", "outage": "yes"})
		pod.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}
		pod.Spec.NodeSelector = nil
		manifest, err := json.Marshal(pod)
		Expect(err).NotTo(HaveOccurred())
		path := filepath.Join(node.StaticPodDir(), "outage.json")
		Expect(os.WriteFile(path, manifest, 0o644)).To(Succeed())
		DeferCleanup(os.Remove, path)

		// Its first report, from the kubelet's log file: a CRI log line is
		// "TIME STREAM TAG MESSAGE". The pod's UID is in its log directory's name.
		var uid string
		Eventually(func(g Gomega) {
			logs, err := filepath.Glob(filepath.Join(node.PodLogsDir(), nns+"_outage-"+localnode.NodeName+"_*", "main", "0.log"))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(logs).To(HaveLen(1), "the static pod's log")
			data, err := os.ReadFile(logs[0])
			g.Expect(err).NotTo(HaveOccurred())
			line, _, _ := strings.Cut(string(data), "\n")
			fields := strings.SplitN(line, " ", 4)
			g.Expect(fields).To(HaveLen(4), "a CRI log line: %q", line)
			g.Expect(fields[3]).To(Equal("first-node 0"), "the static pod's first report")
			dir := filepath.Base(filepath.Dir(filepath.Dir(logs[0])))
			uid = dir[strings.LastIndex(dir, "_")+1:]
		}).WithContext(ctx).WithTimeout(2 * time.Minute).Should(Succeed())

		// Placed it stays, past the grace: the API cannot confirm it, and nothing lapses while
		// it does not answer.
		mainTasks := func(g Gomega) []task {
			tasks, err := containerTasks(ctx, "pod://"+uid)
			g.Expect(err).NotTo(HaveOccurred())
			main := slices.DeleteFunc(tasks, func(t task) bool {
				cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", t.PID))
				return !strings.Contains(string(cmdline), "first-node")
			})
			g.Expect(main).NotTo(BeEmpty(), "the static pod's workload tasks")
			return main
		}
		allPlaced := func(g Gomega) {
			for _, t := range mainTasks(g) {
				g.Expect(t.Force).To(Equal(0), "task %d of the static pod's workload", t.TID)
			}
		}
		// The threads the workload starts after its first report are caught as ever (fork
		// events, rescans: the emulator does not inherit like the kernel).
		Eventually(allPlaced).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
		Consistently(allPlaced).WithContext(ctx).WithTimeout(grace + 15*time.Second).WithPolling(time.Second).Should(Succeed())
		state, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", node.Pids["kube-apiserver"]))
		Expect(err).NotTo(HaveOccurred())
		_, after, _ := strings.Cut(string(state), ") ")
		Expect(after).To(HavePrefix("T"), "kube-apiserver paused all along")

		// The API back: the kubelet's mirror pod reaches the agent, which confirms the same
		// placement and counts it at the start.
		Expect(node.ResumeAPIServer()).To(Succeed())
		resumed := time.Now()
		Eventually(func(g Gomega) {
			var mirror corev1.Pod
			g.Expect(cl.Get(ctx, client.ObjectKey{Namespace: nns, Name: "outage-" + localnode.NodeName}, &mirror)).To(Succeed())
			g.Expect(mirror.Status.ContainerStatuses).To(ContainElement(And(HaveField("Name", "main"), HaveField("ContainerID", Not(BeEmpty())))))
		}).WithContext(ctx).WithTimeout(grace).Should(Succeed(), "the kubelet reports the static pod's container within the grace")
		logf("the API back, the mirror pod reports the container after %s", time.Since(resumed).Round(time.Millisecond))
		Eventually(func(g Gomega) {
			now := first(g)
			g.Expect(now.Containers).To(Equal(before.Containers + 1))
			g.Expect(now.PlacedAtStart).To(Equal(before.PlacedAtStart + 1))
		}).WithContext(ctx).WithTimeout(2 * time.Minute).Should(Succeed())
	}, SpecTimeout(8*time.Minute))
})

// firstNodeDeployment is a Deployment of replicas firstNodePods with labels.
func firstNodeDeployment(namespace, name string, replicas int32, labels map[string]string, args ...string) *appsv1.Deployment {
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}}
	dep.Spec.Replicas = ptr(replicas)
	dep.Spec.Selector = &metav1.LabelSelector{MatchLabels: labels}
	dep.Spec.Template.Labels = labels
	dep.Spec.Template.Spec = firstNodePod(namespace, "", labels, args...).Spec
	return dep
}

// nriNamespace fails unless the nodes' runtime serves NRI (run says how to get one), creates
// the namespace and returns a client.
func nriNamespace(ctx context.Context, namespace, run string) client.Client {
	GinkgoHelper()
	if !prov.nri() {
		Fail("the specs about NRI need a runtime with NRI: " + run)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	Expect(err).NotTo(HaveOccurred())
	out, err := kubectl(ctx, "create", "namespace", namespace)
	Expect(err).NotTo(HaveOccurred(), out)
	return newClient(cfg)
}

// nriCleanup deletes the namespace and uninstalls the agent if it is installed.
func nriCleanup(ctx context.Context, namespace string) {
	_, _ = kubectl(ctx, "delete", "namespace", namespace, "--wait=true", "--timeout=180s")
	if _, err := helm(ctx, "status", release, "-n", agentNamespace); err == nil {
		uninstallAgent(ctx)
	}
}

// firstNodePod is a pod in namespace, with labels, whose container reports its forced
// node first (workload first-node, with args), from the emulator's view of the node
// (hostPID: the view is by host pid; mounted read-only).
func firstNodePod(namespace, name string, labels map[string]string, args ...string) *corev1.Pod {
	p := workloadPodOn(primaryNode(), namespace, name, labels, nil, "main")
	p.Spec.HostPID = true
	p.Spec.Containers[0].Args = append([]string{"first-node", "-emulator", "/emulator", "-threads", "2"}, args...)
	p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "emulator", MountPath: "/emulator", ReadOnly: true}}
	p.Spec.Volumes = []corev1.Volume{{Name: "emulator", VolumeSource: corev1.VolumeSource{
		HostPath: &corev1.HostPathVolumeSource{Path: strings.TrimSuffix(emulatorView, "/proc")}}}}
	return p
}

// numaMapsPolicy is the memory policy of process pid on the primary node, as the first
// mapping of its numa_maps shows it (a mapping of the program's own file, which has no
// policy of its own: the task's).
func numaMapsPolicy(ctx context.Context, pid int) (string, error) {
	out, err := nodeShell(ctx, fmt.Sprintf("head -n 1 /proc/%d/numa_maps", pid))
	if err != nil {
		return "", fmt.Errorf("reading the numa_maps of %d: %w: %s", pid, err, out)
	}
	fields := strings.Fields(out)
	if len(fields) < 2 {
		return "", fmt.Errorf("numa_maps of %d: %q", pid, out)
	}
	// "prefer (many)=balancing:0" is two fields.
	if fields[1] == "prefer" && len(fields) > 2 && strings.HasPrefix(fields[2], "(many)") {
		return fields[1] + " " + fields[2], nil
	}
	return fields[1], nil
}

// firstReports checks that n running pods in namespace match the label selector sel and that each one's
// container printed "first-node 0" as its first line.
func firstReports(ctx context.Context, cl client.Client, namespace, sel string, n int) func(Gomega) {
	return func(g Gomega) {
		for name, out := range runningLogs(ctx, g, cl, namespace, sel, n) {
			first, _, _ := strings.Cut(out, "\n")
			g.Expect(first).To(Equal("first-node 0"), fmt.Sprintf("pod %s's first report (image %s); its log:\n%s", name, localnode.WorkloadImage, out))
		}
	}
}

// runningPods counts the pods in namespace that match sel, run and are not being deleted.
func runningPods(ctx context.Context, g Gomega, cl client.Client, namespace string, sel client.MatchingLabels) int {
	var pods corev1.PodList
	g.Expect(cl.List(ctx, &pods, client.InNamespace(namespace), sel)).To(Succeed())
	running := 0
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			running++
		}
	}
	return running
}

// runningLogs checks that n pods in namespace match the label selector sel and run, and
// returns their main container's logs by pod name.
func runningLogs(ctx context.Context, g Gomega, cl client.Client, namespace, sel string, n int) map[string]string {
	selector, err := labels.Parse(sel)
	g.Expect(err).NotTo(HaveOccurred())
	var pods corev1.PodList
	g.Expect(cl.List(ctx, &pods, client.InNamespace(namespace), client.MatchingLabelsSelector{Selector: selector})).To(Succeed())
	g.Expect(pods.Items).To(HaveLen(n))
	logs := map[string]string{}
	for _, p := range pods.Items {
		g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning), p.Name)
		out, err := kubectl(ctx, "logs", "-n", namespace, p.Name, "-c", "main")
		g.Expect(err).NotTo(HaveOccurred())
		logs[p.Name] = out
	}
	return logs
}

// Start to placed, measured from inside each container: the agent as the runtime's NRI
// plugin against the API path (the same agent with nri.enabled=false), 50 pods created one
// by one and a Deployment of 30 replicas created at once, in one run. By hand only (the
// figures go to BENCHMARKS.md): make e2e E2E_NRI=1 E2E_LABELS=measure
var _ = Describe("Start to placed, NRI against the API path", Ordered, Label("nri", "measure"), func() {
	const (
		mns      = "e2e-nri-measure"
		oneByOne = 50
		burst    = 30
	)
	var cl client.Client

	BeforeAll(func(ctx SpecContext) {
		cl = nriNamespace(ctx, mns, "make e2e E2E_NRI=1 E2E_LABELS=measure")
		installAgent(ctx)
	}, NodeTimeout(4*time.Minute))
	AfterAll(func(ctx SpecContext) { nriCleanup(ctx, mns) }, NodeTimeout(5*time.Minute))

	// placedAfter waits for the running pods matching sel (n of them) to print their
	// placed-after-ms line, and returns the figures and how many first reports were node 0.
	placedAfter := func(ctx context.Context, sel string, n int) (ms []float64, atFirst int) {
		GinkgoHelper()
		Eventually(func(g Gomega) {
			ms, atFirst = nil, 0
			for name, out := range runningLogs(ctx, g, cl, mns, sel, n) {
				var v float64
				found := false
				for _, line := range strings.Split(out, "\n") {
					if line == "first-node 0" {
						atFirst++
					}
					if _, err := fmt.Sscanf(line, "placed-after-ms %f", &v); err == nil {
						found = true
					}
				}
				g.Expect(found).To(BeTrue(), "pod %s placed (its log: %q)", name, out)
				ms = append(ms, v)
			}
		}).WithContext(ctx).WithTimeout(5 * time.Minute).WithPolling(2 * time.Second).Should(Succeed())
		return ms, atFirst
	}
	measure := func(ctx context.Context, path string) {
		GinkgoHelper()
		app := "m-" + path
		applyPreferenceIn(ctx, mns, app, "node: 0")
		for i := range oneByOne {
			name := fmt.Sprintf("%s-%d", app, i)
			Expect(cl.Create(ctx, firstNodePod(mns, name, map[string]string{"app": app}, "-await"))).To(Succeed())
			containerIDs(ctx, cl, mns, name)
		}
		ms, atFirst := placedAfter(ctx, "app="+app, oneByOne)
		logf("startplaced path=%s kind=one-by-one %s first_report_node0=%d", path, quantiles(ms), atFirst)

		dep := firstNodeDeployment(mns, app+"-burst", burst, map[string]string{"app": app + "-burst"}, "-await")
		// The preference selects both: its selector is app in (app, app-burst).
		out, err := kubectl(ctx, "patch", "numapref", app, "-n", mns, "--type=merge", "-p",
			fmt.Sprintf(`{"spec":{"selector":{"matchLabels":null,"matchExpressions":[{"key":"app","operator":"In","values":[%q,%q]}]}}}`, app, app+"-burst"))
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(cl.Create(ctx, dep)).To(Succeed())
		ms, atFirst = placedAfter(ctx, "app="+app+"-burst", burst)
		logf("startplaced path=%s kind=burst %s first_report_node0=%d", path, quantiles(ms), atFirst)
		out, err = kubectl(ctx, "delete", "deployment,pod", "--all", "-n", mns, "--wait=true", "--timeout=180s")
		Expect(err).NotTo(HaveOccurred(), out)
	}

	It("times start to placed from inside each container, through NRI and through the API", func(ctx SpecContext) {
		measure(ctx, "nri")
		out, err := helm(ctx, "upgrade", release, "../../charts/numapref", "-n", agentNamespace, "--reuse-values",
			"--set", "nri.enabled=false", "--wait", "--timeout", "2m")
		Expect(err).NotTo(HaveOccurred(), out)
		Eventually(func(g Gomega) {
			var rep numav1.NumaNodeReport
			g.Expect(cl.Get(ctx, client.ObjectKey{Name: primaryNode()}, &rep)).To(Succeed())
			g.Expect(rep.Status.NRI).To(BeEmpty(), "the agent without NRI")
		}).WithContext(ctx).WithTimeout(90 * time.Second).Should(Succeed())
		measure(ctx, "api")
	}, SpecTimeout(30*time.Minute))
})

// quantiles formats n, p50, p99 and max of ms.
func quantiles(ms []float64) string {
	s := slices.Clone(ms)
	slices.Sort(s)
	if len(s) == 0 {
		return "n=0"
	}
	return fmt.Sprintf("n=%d p50_ms=%.1f p99_ms=%.1f max_ms=%.1f", len(s), s[len(s)/2], s[(len(s)*99)/100], s[len(s)-1])
}
