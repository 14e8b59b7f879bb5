// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/internal/inspect"
	"github.com/numapref/numapref/internal/nodeagent"
	"github.com/numapref/numapref/test/localnode"
)

const ns = "default"

// task is one task of a container as the node shows it: /proc for the task, the
// emulator's view for its forced preferred node (-1 when the view has no live entry).
type task struct {
	PID, TID, Force int
}

// containerTasks lists every task of a container, found through /proc/<pid>/cgroup (the
// container ID is in its cgroup path on every driver), with its forced preferred node from
// the emulator's task view. A view entry counts only if its start time matches the task's,
// so a recycled tid is never mistaken for a placed one.
func containerTasks(ctx context.Context, containerID string) ([]task, error) {
	return containerTasksOn(ctx, primaryNode(), containerID)
}

// containerTasksOn is containerTasks for a container on the named node.
func containerTasksOn(ctx context.Context, node, containerID string) ([]task, error) {
	_, id, ok := strings.Cut(containerID, "://")
	if !ok || id == "" {
		return nil, fmt.Errorf("container ID %q", containerID)
	}
	// Builtins only, but for one grep: this runs in tight polling loops.
	script := fmt.Sprintf("id=%s; view=%s\n", id, emulatorView) + `for p in $(grep -l "$id" /proc/[0-9]*/cgroup 2>/dev/null | cut -d/ -f3); do
  for d in /proc/$p/task/*; do
    t=${d##*/}
    read -r stat < $d/stat 2>/dev/null || continue
    set -- ${stat##*') '}
    st=${20}
    force=-1
    v=$view/$p/task/$t/sched
    if [ -r $v ]; then
      f=; vst=
      while IFS=: read -r k val; do
        case $k in numa_preferred_nid_force*) f=$val ;; start_time*) vst=$val ;; esac
      done < $v
      set -- $f; f=$1; set -- $vst; vst=$1
      [ -n "$f" ] && [ "$vst" = "$st" ] && force=$f
    fi
    echo "$p $t $force"
  done
done`
	out, err := prov.nodeShell(ctx, node, script)
	if err != nil {
		return nil, fmt.Errorf("reading tasks of %s on %s: %w: %s", id, node, err, out)
	}
	var tasks []task
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 {
			continue
		}
		var t task
		var errs [3]error
		t.PID, errs[0] = strconv.Atoi(f[0])
		t.TID, errs[1] = strconv.Atoi(f[1])
		t.Force, errs[2] = strconv.Atoi(f[2])
		if errs[0] != nil || errs[1] != nil || errs[2] != nil {
			return nil, fmt.Errorf("bad task line %q", line)
		}
		tasks = append(tasks, t)
	}
	return tasks, nil
}

func processes(tasks []task) []int {
	var pids []int
	for _, t := range tasks {
		if !slices.Contains(pids, t.PID) {
			pids = append(pids, t.PID)
		}
	}
	return pids
}

// allPrefer checks that a container has at least minTasks tasks and every one of them has
// node forced.
func allPrefer(ctx context.Context, containerID string, node, minTasks int) func(Gomega) {
	return allPreferOn(ctx, primaryNode(), containerID, node, minTasks)
}

// allPreferOn is allPrefer for a container on the Kubernetes node host.
func allPreferOn(ctx context.Context, host, containerID string, node, minTasks int) func(Gomega) {
	return func(g Gomega) {
		tasks, err := containerTasksOn(ctx, host, containerID)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(len(tasks)).To(BeNumerically(">=", minTasks), "tasks of %s", containerID)
		for _, t := range tasks {
			g.Expect(t.Force).To(Equal(node), "task %d of process %d", t.TID, t.PID)
		}
	}
}

// applyPreference applies, with kubectl, a NumaPreference named name that sends the pods
// labelled app=<name> to NUMA node 0.
func applyPreference(ctx context.Context, name string) {
	GinkgoHelper()
	applyPreferenceIn(ctx, ns, name, "node: 0")
}

// applyPreferenceIn applies a NumaPreference named name in namespace namespace, for the
// pods labelled app=<name>, with the spec lines placement (e.g. "mode: Spread").
func applyPreferenceIn(ctx context.Context, namespace, name, placement string) {
	GinkgoHelper()
	out, err := kubectlIn(ctx, fmt.Sprintf(`apiVersion: numa.numapref.io/v1alpha1
kind: NumaPreference
metadata: {name: %[1]s, namespace: %[2]s}
spec:
  selector: {matchLabels: {app: %[1]s}}
  %[3]s
`, name, namespace, placement), "apply", "-f", "-")
	Expect(err).NotTo(HaveOccurred(), out)
}

// workloadPod is a workload pod on the primary node.
func workloadPod(name string, labels, annotations map[string]string, containers ...string) *corev1.Pod {
	return workloadPodOn(primaryNode(), ns, name, labels, annotations, containers...)
}

// workloadPodOn is a workload pod in namespace on the Kubernetes node host (a control plane
// too: it tolerates every taint).
func workloadPodOn(host, namespace, name string, labels, annotations map[string]string, containers ...string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: labels, Annotations: annotations}}
	p.Spec.NodeSelector = map[string]string{corev1.LabelHostname: host}
	p.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
	for _, c := range containers {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{
			Name: c, Image: localnode.WorkloadImage, ImagePullPolicy: corev1.PullNever,
			Args: []string{"work", "-threads", "8"},
		})
	}
	return p
}

// containerIDs waits until the pod namespace/name runs with every container ready and
// returns its container IDs by container name.
func containerIDs(ctx context.Context, cl client.Client, namespace, name string) map[string]string {
	GinkgoHelper()
	pod := &corev1.Pod{}
	Eventually(func(g Gomega) {
		g.Expect(cl.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, pod)).To(Succeed())
		g.Expect(pod.Status.Phase).To(Equal(corev1.PodRunning))
		g.Expect(pod.Status.ContainerStatuses).To(HaveLen(len(pod.Spec.Containers)))
		for _, s := range pod.Status.ContainerStatuses {
			g.Expect(s.Ready).To(BeTrue(), s.Name)
		}
	}).WithContext(ctx).WithTimeout(60 * time.Second).Should(Succeed())
	out := map[string]string{}
	for _, s := range pod.Status.ContainerStatuses {
		out[s.Name] = s.ContainerID
	}
	return out
}

// newClient is a controller-runtime client with the core and numapref types.
func newClient(cfg *rest.Config) client.Client {
	GinkgoHelper()
	scheme := runtime.NewScheme()
	Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
	Expect(numav1.AddToScheme(scheme)).To(Succeed())
	cl, err := client.New(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	return cl
}

// installAgent installs the chart with the agent image the suite built, the emulated
// kernel and a 2 s rescan, and the values set (key=value, after the provider's), and waits
// for the DaemonSet.
func installAgent(ctx context.Context, set ...string) {
	GinkgoHelper()
	args := []string{"install", release, "../../charts/numapref", "-n", agentNamespace, "--create-namespace",
		"--wait", "--timeout", "2m",
		"--set", "image.repository=" + strings.Split(localnode.AgentImage, ":")[0],
		"--set", "image.tag=" + strings.Split(localnode.AgentImage, ":")[1],
		"--set", "image.pullPolicy=Never", "--set", "kernel=emulated", "--set", "rescanInterval=2s",
		"--set", "pageMigration.enabled=true"}
	for _, v := range append(prov.values(), set...) {
		args = append(args, "--set", v)
	}
	start := time.Now()
	out, err := helm(ctx, args...)
	Expect(err).NotTo(HaveOccurred(), out)
	logf("helm install --wait: %s", time.Since(start).Round(time.Millisecond))
}

// uninstallAgent uninstalls the chart and waits for its resources to go, the summarizer's
// lease too: helm deletes the summarizer's RBAC together with the summarizer, so the last
// leader may be refused the release of its lease, and an install after this one (the other
// ordered container) would wait the lease out before any summary is written.
// It returns helm's output, which holds the uninstall check's (the pre-delete hook's log).
func uninstallAgent(ctx context.Context) string {
	GinkgoHelper()
	out, err := helm(ctx, "uninstall", release, "-n", agentNamespace, "--wait")
	Expect(err).NotTo(HaveOccurred(), out)
	lease, err := kubectl(ctx, "delete", "lease", "numapref-summary", "-n", agentNamespace, "--ignore-not-found")
	Expect(err).NotTo(HaveOccurred(), lease)
	return out
}

var _ = Describe("numapref installed with Helm on a real node", Ordered, func() {
	var (
		cl       client.Client
		ids      map[string]string // container name -> ID of the selected pod
		scraper  string            // a token allowed to GET /metrics
		agentCA  string            // the CA the chart publishes for the agents' certificate
		agentSel = "app.kubernetes.io/name=numapref,app.kubernetes.io/component=agent"
	)

	podIDs := func(ctx context.Context, name string) map[string]string {
		GinkgoHelper()
		return containerIDs(ctx, cl, ns, name)
	}

	BeforeAll(func(ctx SpecContext) {
		cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		Expect(err).NotTo(HaveOccurred())
		cl = newClient(cfg)
	})

	AfterAll(func(ctx SpecContext) {
		_, _ = kubectl(ctx, "delete", "numapref", "--all", "-n", ns, "--wait=true")
		_, _ = kubectl(ctx, "delete", "pod", "--all", "-n", ns, "--grace-period=1", "--wait=true")
		uninstallAgent(ctx)
	}, NodeTimeout(2*time.Minute))

	It("installs the agent with Helm, which labels the node", func(ctx SpecContext) {
		installAgent(ctx)
		Eventually(func(g Gomega) {
			node := &corev1.Node{}
			g.Expect(cl.Get(ctx, client.ObjectKey{Name: primaryNode()}, node)).To(Succeed())
			g.Expect(node.Labels).To(HaveKeyWithValue("numapref.io/kernel-support", "emulator"))
			g.Expect(node.Labels).To(HaveKey("numapref.io/numa-nodes"))
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
	}, SpecTimeout(3*time.Minute))

	It("refuses invalid NumaPreferences with a clear message", func(ctx SpecContext) {
		for manifest, want := range map[string]string{
			"spec: {selector: {matchLabels: {app: x}}, node: -1}":                 "spec.node",
			"spec: {selector: {}, node: 0}":                                       "selector",
			"spec: {selector: {matchLabels: {app: x}}, node: 0, mode: Sometimes}": "spec.mode",
		} {
			out, err := kubectlIn(ctx, "apiVersion: numa.numapref.io/v1alpha1\nkind: NumaPreference\nmetadata: {name: bad, namespace: default}\n"+manifest, "apply", "-f", "-")
			Expect(err).To(HaveOccurred(), "accepted: %s", manifest)
			Expect(out).To(ContainSubstring(want), manifest)
		}
	})

	It("lets a namespace's editors write NumaPreferences and its viewers read them, through the built-in roles", func(ctx SpecContext) {
		// The chart's tenant roles aggregate into edit/admin and view: the cluster's
		// kube-controller-manager folds their rules in, so a RoleBinding to the built-in
		// role is all a tenant needs.
		for _, role := range []string{"edit", "view"} {
			_, err := kubectl(ctx, "-n", ns, "create", "rolebinding", "e2e-tenant-"+role, "--clusterrole="+role, "--user=e2e-tenant-"+role)
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(func(ctx SpecContext) {
				_, _ = kubectl(ctx, "-n", ns, "delete", "rolebinding", "e2e-tenant-"+role, "--ignore-not-found")
			})
		}
		can := func(user, verb, resource string) func(g Gomega) string {
			return func(g Gomega) string {
				// kubectl reads "resource/x" as the object named x: a subresource is a flag.
				args := []string{"auth", "can-i", verb, resource, "-n", ns, "--as", user}
				if r, sub, ok := strings.Cut(resource, "/"); ok {
					args = []string{"auth", "can-i", verb, r, "--subresource", sub, "-n", ns, "--as", user}
				}
				// "no" exits 1; a warning (a cluster-scoped resource) comes first.
				out, _ := kubectl(ctx, args...)
				lines := strings.Split(strings.TrimSpace(out), "\n")
				return lines[len(lines)-1]
			}
		}
		for _, c := range []struct{ user, verb, resource, want string }{
			{"e2e-tenant-edit", "create", "numapreferences.numa.numapref.io", "yes"},
			{"e2e-tenant-edit", "delete", "numapreferences.numa.numapref.io", "yes"},
			{"e2e-tenant-edit", "update", "numapreferences.numa.numapref.io/status", "no"},
			{"e2e-tenant-view", "list", "numapreferences.numa.numapref.io", "yes"},
			{"e2e-tenant-view", "create", "numapreferences.numa.numapref.io", "no"},
			{"e2e-tenant-edit", "list", "numanodereports.numa.numapref.io", "no"},
		} {
			Eventually(can(c.user, c.verb, c.resource)).WithContext(ctx).WithTimeout(30*time.Second).
				Should(Equal(c.want), "%s may %s %s", c.user, c.verb, c.resource)
		}
	})

	It("gives every task of a selected multi-threaded pod its preferred node", func(ctx SpecContext) {
		Expect(cl.Create(ctx, workloadPod("work", map[string]string{"app": "e2e-work"}, nil, "work", "helper"))).To(Succeed())
		ids = podIDs(ctx, "work")
		start := time.Now()
		applyPreference(ctx, "e2e-work")
		for _, id := range ids {
			// The workload's 8 threads plus the Go runtime's own.
			Eventually(allPrefer(ctx, id, 0, 9)).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
		}
		logf("NumaPreference applied to every task in %s", time.Since(start).Round(time.Millisecond))

		// The pod's sandbox is not a selected container: its task stays untouched.
		pod := &corev1.Pod{}
		Expect(cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: "work"}, pod)).To(Succeed())
		// The pod's cgroup names its uid: as is with cgroupfs, dashes escaped to "_" in
		// systemd's slice names.
		uid := string(pod.UID)
		sandbox, err := nodeShell(ctx, fmt.Sprintf(`grep -lE "pod(%s|%s)" /proc/[0-9]*/cgroup | cut -d/ -f3`, uid, strings.ReplaceAll(uid, "-", "_")))
		Expect(err).NotTo(HaveOccurred())
		Expect(strings.Fields(sandbox)).NotTo(BeEmpty())
		for _, p := range strings.Fields(sandbox) {
			pid, _ := strconv.Atoi(p)
			if slices.ContainsFunc(slices.Collect(maps.Values(ids)), func(id string) bool {
				ts, _ := containerTasks(ctx, id)
				return slices.Contains(processes(ts), pid)
			}) {
				continue
			}
			view, _ := nodeShell(ctx, fmt.Sprintf("cat %s/%d/task/%d/sched 2>/dev/null || echo none", emulatorView, pid, pid))
			Expect(view).To(Or(Equal("none\n"), ContainSubstring("numa_preferred_nid_force : -1")), "sandbox process %d", pid)
		}

		Eventually(func(g Gomega) {
			out, err := kubectl(ctx, "get", "numapref", "e2e-work", "-n", ns, "--no-headers")
			g.Expect(err).NotTo(HaveOccurred())
			f := strings.Fields(out)
			g.Expect(f).To(HaveLen(7), out) // NAME MODE NODE-ID PODS TASKS READY AGE
			g.Expect(f[1:4]).To(Equal([]string{"Static", "0", "1"}), out)
			tasks, _ := strconv.Atoi(f[4])
			g.Expect(tasks).To(BeNumerically(">=", 18), out)
			g.Expect(f[5]).To(Equal("True"), out)
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
		out, err := kubectl(ctx, "get", "numapref", "e2e-work", "-n", ns)
		Expect(err).NotTo(HaveOccurred())
		logf("kubectl get numapref:\n%s", out)
		Eventually(func(g Gomega) {
			out, err := kubectl(ctx, "get", "events", "-n", ns, "--field-selector", "involvedObject.name=work,reason=Applied")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(out).To(ContainSubstring("prefers NUMA node 0 (NumaPreference e2e-work)"))
		}).WithContext(ctx).WithTimeout(20 * time.Second).Should(Succeed())
	}, SpecTimeout(2*time.Minute))

	It("places children a container forks after it started", func(ctx SpecContext) {
		id := ids["work"]
		before, err := containerTasks(ctx, id)
		Expect(err).NotTo(HaveOccurred())
		start := time.Now()
		signalWorkload(ctx, id, "USR1") // fork(): the kernel resets the child to -1
		signalWorkload(ctx, id, "USR2") // os/exec: a CLONE_VM child, inherits across exec
		Eventually(func(g Gomega) {
			tasks, err := containerTasks(ctx, id)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(processes(tasks)).To(HaveLen(len(processes(before))+2), "two new processes")
			allPrefer(ctx, id, 0, len(before)+2)(g)
		}).WithContext(ctx).WithTimeout(15 * time.Second).WithPolling(20 * time.Millisecond).Should(Succeed())
		logf("forked children placed within %s (fork events on, rescan 2s)", time.Since(start).Round(time.Millisecond))
	}, SpecTimeout(time.Minute))

	It("shows the pod the way the agent sees it with kubectl numapref inspect", func(ctx SpecContext) {
		// The e2e kubeconfig's user is no service account: it asks for the inspector's tokens.
		makeInspector(ctx, ns, "e2e-inspector")
		// No TLS flag: the plugin verifies the agent with the CA the chart published.
		args := []string{"inspect", ns + "/work", "--token-service-account", ns + "/e2e-inspector"}
		if u := prov.agentURL(); u != "" {
			args = append(args, "--agent-url", u)
		}
		// Until the API server's RBAC has the new bindings, the agent refuses (and caches a
		// refusal for 10 s).
		var out string
		Eventually(func() error {
			var err error
			out, err = run(ctx, "", plugin, append(args, "-o", "json")...)
			return err
		}).WithContext(ctx).WithTimeout(30 * time.Second).WithPolling(time.Second).Should(Succeed())
		var pod inspect.Pod
		Expect(json.Unmarshal([]byte(out), &pod)).To(Succeed(), out)
		Expect(pod.Node).To(Equal(primaryNode()))
		Expect(pod.Kernel.Backend).To(Equal("emulator"))
		Expect(pod.Containers).To(HaveLen(2))
		for _, c := range pod.Containers {
			Expect(c.ContainerID).To(Equal(ids[c.Name]))
			Expect(c.DesiredNode).To(HaveValue(Equal(0)), c.Name)
			Expect(c.Source).To(Equal("NumaPreference/e2e-work"))
			Expect(c.Reason).To(Equal(numav1.ReasonApplied))
			if !prov.nri() {
				// No NRI (Debian's containerd 1.6): placed once the API reported it running.
				Expect(c.PlacedAt).To(Equal(nodeagent.PlacedAtAfterStart), c.Name)
			}
			Expect(c.Cpuset).NotTo(BeNil())
			Expect(c.Cpuset.Mems).To(ContainElement(0))
			// The agent's view agrees with the node's, task by task.
			onNode, err := containerTasks(ctx, ids[c.Name])
			Expect(err).NotTo(HaveOccurred())
			var seen []int
			for _, t := range c.Tasks {
				Expect(t.Forced).To(HaveValue(Equal(0)), "task %d", t.TID)
				seen = append(seen, t.TID)
			}
			for _, t := range onNode {
				Expect(seen).To(ContainElement(t.TID), "inspect misses task %d of %s", t.TID, c.Name)
			}
		}
		out, err := run(ctx, "", plugin, args...)
		Expect(err).NotTo(HaveOccurred(), out)
		logf("kubectl numapref inspect %s/work:\n%s", ns, out)
		Expect(out).To(ContainSubstring("FORCED"))

		// A pod of a namespace the inspector may not read (the agent's own): the agent's 403.
		agentPod, err := kubectl(ctx, "get", "pods", "-n", agentNamespace, "-l", agentSel, "-o", "jsonpath={.items[0].metadata.name}")
		Expect(err).NotTo(HaveOccurred(), agentPod)
		other := append([]string{"inspect", agentNamespace + "/" + strings.TrimSpace(agentPod)}, args[2:]...)
		out, err = run(ctx, "", plugin, other...)
		Expect(err).To(HaveOccurred(), out)
		Expect(out).To(ContainSubstring("may not get pods in namespace " + agentNamespace))
	})

	It("reports the node in its own NumaNodeReport, and tells when NUMA balancing is off", func(ctx SpecContext) {
		pod := &corev1.Pod{}
		Expect(cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: "work"}, pod)).To(Succeed())
		node := pod.Spec.NodeName
		sysctl, err := nodeShell(ctx, "cat /proc/sys/kernel/numa_balancing")
		Expect(err).NotTo(HaveOccurred(), sysctl)
		enabled := strings.TrimSpace(sysctl) != "0"
		logf("kernel.numa_balancing on %s: %s", node, strings.TrimSpace(sysctl))

		Eventually(func(g Gomega) {
			rep := &numav1.NumaNodeReport{}
			g.Expect(cl.Get(ctx, client.ObjectKey{Name: node}, rep)).To(Succeed())
			g.Expect(rep.OwnerReferences).To(ConsistOf(And(HaveField("Kind", "Node"), HaveField("Name", node))))
			g.Expect(rep.Status.KernelSupport).To(Equal("emulator"))
			entry := reportEntry(rep, ns, "e2e-work")
			g.Expect(entry).NotTo(BeNil(), "the report's entry for e2e-work")
			g.Expect(entry.Pods).To(Equal(int32(1)))
			g.Expect(entry.Containers).To(Equal(int32(2)))
			g.Expect(entry.PodsByNode).To(Equal([]numav1.NodeCount{{Node: 0, Pods: 1}}))
			if !prov.nri() {
				// A runtime without NRI (Debian's containerd 1.6) under the chart's default,
				// NRI on: the agent runs (its socket directory made, empty), the report says
				// so once for the node, and nothing was placed at its start.
				g.Expect(rep.Status.NRI).To(Equal(numav1.NRIDisconnected))
				c := meta.FindStatusCondition(rep.Status.Conditions, numav1.ConditionNRIConnected)
				g.Expect(c).NotTo(BeNil())
				g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
				g.Expect(rep.Status.Mechanisms).To(Equal([]string{"prctl", "migrate"}))
				g.Expect(entry.PlacedAtStart).To(BeZero())
				n := &corev1.Node{}
				g.Expect(cl.Get(ctx, client.ObjectKey{Name: node}, n)).To(Succeed())
				g.Expect(n.Labels).To(HaveKeyWithValue("numapref.io/nri", "disconnected"))
				g.Expect(n.Labels).To(HaveKeyWithValue("numapref.io/memory-policy", "unavailable"))
			}
			if enabled {
				g.Expect(entry.Ineffective).To(BeEmpty())
			} else {
				g.Expect(entry.Ineffective).To(Equal([]numav1.ReasonCount{{Reason: numav1.ReasonNumaBalancingDisabled, Count: 2}}))
			}
			np := &numav1.NumaPreference{}
			g.Expect(cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: "e2e-work"}, np)).To(Succeed())
			eff := meta.FindStatusCondition(np.Status.Conditions, numav1.ConditionEffective)
			g.Expect(eff).NotTo(BeNil())
			if enabled {
				g.Expect(eff.Status).To(Equal(metav1.ConditionTrue))
			} else {
				g.Expect(eff.Status).To(Equal(metav1.ConditionFalse))
				g.Expect(eff.Reason).To(Equal(numav1.ReasonNumaBalancingDisabled))
			}
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
		out, err := kubectl(ctx, "get", "numanodereports")
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(ContainSubstring(node))
		logf("kubectl get numanodereports:\n%s", out)
		out, err = kubectl(ctx, "get", "numapref", "e2e-work", "-n", ns, "-o", "wide")
		Expect(err).NotTo(HaveOccurred(), out)
		logf("kubectl get numapref -o wide:\n%s", out)

		out, err = run(ctx, "", plugin, "status", ns+"/e2e-work")
		Expect(err).NotTo(HaveOccurred(), out)
		logf("kubectl numapref status %s/e2e-work:\n%s", ns, out)
		if enabled {
			Expect(out).To(ContainSubstring("No node has problems."))
		} else {
			Expect(out).To(ContainSubstring("Nodes with problems:"))
			Expect(out).To(MatchRegexp(node + `\s.*NumaBalancingDisabled 2`))
			Eventually(func(g Gomega) {
				out, err := kubectl(ctx, "get", "events", "-n", ns, "--field-selector", "involvedObject.name=work,reason=NumaBalancingDisabled")
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(out).To(ContainSubstring("the kernel ignores the preferred node until it is enabled"))
			}).WithContext(ctx).WithTimeout(20 * time.Second).Should(Succeed())
		}
	})

	It("garbage-collects the report of a node that no longer exists", func(ctx SpecContext) {
		ghost := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "e2e-ghost"}}
		Expect(cl.Create(ctx, ghost)).To(Succeed())
		rep := &numav1.NumaNodeReport{ObjectMeta: metav1.ObjectMeta{Name: "e2e-ghost",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: ghost.Name, UID: ghost.UID}}}}
		Expect(cl.Create(ctx, rep)).To(Succeed())
		Expect(cl.Delete(ctx, ghost)).To(Succeed())
		start := time.Now()
		Eventually(func(g Gomega) {
			err := cl.Get(ctx, client.ObjectKey{Name: "e2e-ghost"}, &numav1.NumaNodeReport{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the ghost's report still exists: %v", err)
		}).WithContext(ctx).WithTimeout(90 * time.Second).WithPolling(time.Second).Should(Succeed())
		logf("the report of a deleted Node was garbage-collected %s later", time.Since(start).Round(time.Second))
	}, SpecTimeout(2*time.Minute))

	It("spreads pods over the host's NUMA nodes: all on node 0 of a one-node host, Ready", func(ctx SpecContext) {
		out, err := kubectlIn(ctx, `apiVersion: numa.numapref.io/v1alpha1
kind: NumaPreference
metadata: {name: e2e-spread, namespace: default}
spec:
  selector: {matchLabels: {app: e2e-spread}}
  mode: Spread
`, "apply", "-f", "-")
		Expect(err).NotTo(HaveOccurred(), out)
		for i := range 3 {
			Expect(cl.Create(ctx, workloadPod(fmt.Sprintf("spread-%d", i), map[string]string{"app": "e2e-spread"}, nil, "app"))).To(Succeed())
		}
		for i := range 3 {
			id := podIDs(ctx, fmt.Sprintf("spread-%d", i))["app"]
			Eventually(allPrefer(ctx, id, 0, 9)).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
		}
		Eventually(func(g Gomega) {
			np := &numav1.NumaPreference{}
			g.Expect(cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: "e2e-spread"}, np)).To(Succeed())
			g.Expect(np.Status.Summary.Pods).To(Equal(int32(3)))
			ready := meta.FindStatusCondition(np.Status.Conditions, numav1.ConditionReady)
			g.Expect(ready).NotTo(BeNil())
			g.Expect(ready.Status).To(Equal(metav1.ConditionTrue), ready.Message)
			for i := range 3 {
				// The count is the group's when the pod was placed: the pods start in any order.
				out, err := kubectl(ctx, "get", "events", "-n", ns, "--field-selector", fmt.Sprintf("involvedObject.name=spread-%d,reason=Applied", i))
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(out).To(MatchRegexp(`prefers NUMA node 0 \(NumaPreference e2e-spread, Spread: [1-3] of [1-3] pods on node 0\)`))
			}
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
		out, err = kubectl(ctx, "delete", "numapref", "e2e-spread", "-n", ns)
		Expect(err).NotTo(HaveOccurred(), out)
		out, err = kubectl(ctx, "delete", "pod", "-n", ns, "-l", "app=e2e-spread", "--grace-period=1", "--wait=true")
		Expect(err).NotTo(HaveOccurred(), out)
	}, SpecTimeout(3*time.Minute))

	It("moves a running pod's pages when its NumaPreference asks, and says so", func(ctx SpecContext) {
		// The pod runs before anything selects it; then a preference with pageMigration
		// Once selects it. This host has one NUMA node, so no page is away from the home:
		// the agent's move (move_pages through its seccomp filter) scans the pod's
		// processes and ends, and the report counts the container as moved by migrate.
		Expect(cl.Create(ctx, workloadPod("e2e-migrate-0", map[string]string{"app": "e2e-migrate"}, nil, "app"))).To(Succeed())
		id := podIDs(ctx, "e2e-migrate-0")["app"]
		applyPreferenceIn(ctx, ns, "e2e-migrate", "node: 0\n  pageMigration: Once")
		Eventually(allPrefer(ctx, id, 0, 9)).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
		Eventually(func(g Gomega) {
			rep := &numav1.NumaNodeReport{}
			g.Expect(cl.Get(ctx, client.ObjectKey{Name: primaryNode()}, rep)).To(Succeed())
			g.Expect(rep.Status.Mechanisms).To(ContainElement("migrate"))
			entry := reportEntry(rep, ns, "e2e-migrate")
			g.Expect(entry).NotTo(BeNil(), "the report's entry for e2e-migrate")
			g.Expect(entry.Containers).To(BeEquivalentTo(1))
			g.Expect(entry.Migrated).To(BeEquivalentTo(1), "the container counted as moved by migrate")
			g.Expect(entry.PagesNotMigrated).To(BeZero())
			n := &corev1.Node{}
			g.Expect(cl.Get(ctx, client.ObjectKey{Name: primaryNode()}, n)).To(Succeed())
			g.Expect(n.Labels).To(HaveKeyWithValue("numapref.io/page-migration", "available"))
		}).WithContext(ctx).WithTimeout(60 * time.Second).Should(Succeed())
		out, err := kubectl(ctx, "delete", "numapref", "e2e-migrate", "-n", ns)
		Expect(err).NotTo(HaveOccurred(), out)
		out, err = kubectl(ctx, "delete", "pod", "-n", ns, "e2e-migrate-0", "--grace-period=1", "--wait=true")
		Expect(err).NotTo(HaveOccurred(), out)
	}, SpecTimeout(3*time.Minute))

	It("follows the pod annotation without any NumaPreference", func(ctx SpecContext) {
		Expect(cl.Create(ctx, workloadPod("annotated", nil, map[string]string{"numapref.io/preferred-node": "0"}, "app"))).To(Succeed())
		id := podIDs(ctx, "annotated")["app"]
		Eventually(allPrefer(ctx, id, 0, 9)).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
		Eventually(func(g Gomega) {
			out, err := kubectl(ctx, "get", "events", "-n", ns, "--field-selector", "involvedObject.name=annotated,reason=Applied")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(out).To(ContainSubstring("annotation"))
		}).WithContext(ctx).WithTimeout(20 * time.Second).Should(Succeed())
	}, SpecTimeout(2*time.Minute))

	It("converges after its agent pod is deleted mid-way", func(ctx SpecContext) {
		id := ids["work"]
		before, err := containerTasks(ctx, id)
		Expect(err).NotTo(HaveOccurred())
		out, err := kubectl(ctx, "delete", "pod", "-n", agentNamespace, "-l", agentSel, "--wait=true")
		Expect(err).NotTo(HaveOccurred(), out)
		signalWorkload(ctx, id, "USR1") // forked while no agent runs: the child holds -1
		Eventually(func(g Gomega) {
			tasks, err := containerTasks(ctx, id)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(processes(tasks)).To(HaveLen(len(processes(before)) + 1))
		}).WithContext(ctx).WithTimeout(10 * time.Second).Should(Succeed())
		out, err = kubectl(ctx, "rollout", "status", "daemonset", "-n", agentNamespace, "--timeout=90s")
		Expect(err).NotTo(HaveOccurred(), out)
		Eventually(allPrefer(ctx, id, 0, len(before)+1)).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
		Eventually(func(g Gomega) {
			np := &numav1.NumaPreference{}
			g.Expect(cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: "e2e-work"}, np)).To(Succeed())
			g.Expect(np.Status.Summary.Tasks).To(BeNumerically(">=", int32(len(before)+1)))
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
	}, SpecTimeout(3*time.Minute))

	It("serves authenticated metrics that show the work", func(ctx SpecContext) {
		for _, args := range [][]string{
			{"create", "serviceaccount", "e2e-scraper", "-n", ns},
			{"create", "clusterrolebinding", "e2e-scraper", "--clusterrole=" + release + "-metrics-reader", "--serviceaccount=" + ns + ":e2e-scraper"},
		} {
			out, err := kubectl(ctx, args...)
			Expect(err).NotTo(HaveOccurred(), out)
		}
		out, err := kubectl(ctx, "create", "token", "e2e-scraper", "-n", ns)
		Expect(err).NotTo(HaveOccurred(), out)
		scraper = strings.TrimSpace(out)
		agentCA, err = kubectl(ctx, "get", "configmap", "numapref-agent-ca", "-n", agentNamespace, "-o", `go-template={{index .data "ca.crt"}}`)
		Expect(err).NotTo(HaveOccurred(), agentCA)
		Expect(agentCA).To(ContainSubstring("BEGIN CERTIFICATE"))
		agentAddr = agentAddress(ctx)
		scrape := func(token string) (string, error) { return nodeShell(ctx, agentCurl(agentCA, token, "/metrics")) }
		Eventually(func(g Gomega) {
			body, err := scrape(scraper)
			g.Expect(err).NotTo(HaveOccurred(), body)
			g.Expect(body).To(ContainSubstring("HTTP 200"))
			g.Expect(metricValue(body, `numapref_managed_tasks`)).To(BeNumerically(">=", 27))
			// Counters start again with each agent pod: this one has placed at least the child
			// forked while no agent ran.
			g.Expect(metricValue(body, `numapref_task_sets_total{result="Applied"}`)).To(BeNumerically(">=", 1))
			g.Expect(metricValue(body, `numapref_kernel_supported{backend="emulator"}`)).To(Equal(1.0))
			// Effect, read at scrape time: this host has one NUMA node, so every byte of
			// the selected container is on its preferred node.
			g.Expect(metricValue(body, `numapref_container_memory_locality_ratio{container="work",namespace="default",pod="work"}`)).To(Equal(1.0))
			g.Expect(metricValue(body, `numapref_container_memory_bytes{container="work",namespace="default",numa_node="0",pod="work"}`)).To(BeNumerically(">", 0))
			g.Expect(body).To(ContainSubstring(`numapref_numa_balancing{mode="disabled"} 1`))
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
		body, err := scrape(scraper)
		Expect(err).NotTo(HaveOccurred())
		lagCount := metricValue(body, `numapref_fork_apply_lag_seconds_count{since="event"}`)
		if lagCount > 0 {
			logf("fork event to applied, in the agent's pod on the emulator: %.0f tasks, mean %.2f ms",
				lagCount, metricValue(body, `numapref_fork_apply_lag_seconds_sum{since="event"}`)/lagCount*1000)
		}

		// A token the API server does not know: 401, never metrics.
		body, err = scrape("not-a-token")
		Expect(err).NotTo(HaveOccurred())
		Expect(body).To(ContainSubstring("HTTP 401"))
		Expect(body).NotTo(ContainSubstring("numapref_"))
		// The scraper's token is for the API server: /metrics takes it, inspect does not.
		body, err = nodeShell(ctx, agentCurl(agentCA, scraper, "/inspect/"+ns+"/work"))
		Expect(err).NotTo(HaveOccurred(), body)
		Expect(body).To(ContainSubstring("HTTP 401"))
		Expect(body).To(ContainSubstring("audience numapref-agent"))
		// A valid identity without the metrics-reader role: 403.
		out, err = kubectl(ctx, "create", "serviceaccount", "e2e-nobody", "-n", ns)
		Expect(err).NotTo(HaveOccurred(), out)
		out, err = kubectl(ctx, "create", "token", "e2e-nobody", "-n", ns)
		Expect(err).NotTo(HaveOccurred(), out)
		body, err = scrape(strings.TrimSpace(out))
		Expect(err).NotTo(HaveOccurred())
		Expect(body).To(ContainSubstring("HTTP 403"))
		Expect(body).NotTo(ContainSubstring("numapref_"))
	}, SpecTimeout(time.Minute))

	It("undoes the preference when the NumaPreference is deleted", func(ctx SpecContext) {
		out, err := kubectl(ctx, "delete", "numapref", "e2e-work", "-n", ns)
		Expect(err).NotTo(HaveOccurred(), out)
		for _, id := range ids {
			Eventually(allPrefer(ctx, id, -1, 9)).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
		}
		// The annotated pod keeps its own preference.
		id := podIDs(ctx, "annotated")["app"]
		Consistently(allPrefer(ctx, id, 0, 9)).WithContext(ctx).WithTimeout(3 * time.Second).Should(Succeed())
	}, SpecTimeout(time.Minute))

	// Issue 7's footprint figures, on this real node: 100 selected pods, steady state.
	It("keeps 100 selected pods placed with a small footprint and no API writes at steady state", Label("footprint"), func(ctx SpecContext) {
		const pods = 100
		start := time.Now()
		for i := range pods {
			p := workloadPod(fmt.Sprintf("scale-%03d", i), map[string]string{"app": "e2e-scale"}, nil, "app")
			p.Spec.Containers[0].Args = []string{"work", "-threads", "2"}
			p.Spec.TerminationGracePeriodSeconds = ptr(int64(1))
			Expect(cl.Create(ctx, p)).To(Succeed())
		}
		Eventually(func(g Gomega) {
			g.Expect(runningPods(ctx, g, cl, ns, client.MatchingLabels{"app": "e2e-scale"})).To(Equal(pods))
		}).WithContext(ctx).WithTimeout(8 * time.Minute).WithPolling(2 * time.Second).Should(Succeed())
		logf("%d pods Running after %s", pods, time.Since(start).Round(time.Second))
		applyPreference(ctx, "e2e-scale")
		start = time.Now()
		Eventually(func(g Gomega) {
			np := &numav1.NumaPreference{}
			g.Expect(cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: "e2e-scale"}, np)).To(Succeed())
			g.Expect(np.Status.Summary.Pods).To(BeEquivalentTo(pods))
			g.Expect(np.Status.Summary.Tasks).To(BeNumerically(">=", pods*3))
		}).WithContext(ctx).WithTimeout(2 * time.Minute).Should(Succeed())
		logf("%d pods placed %s after the NumaPreference", pods, time.Since(start).Round(time.Millisecond))

		// The agent of this node: its pod's container, found by its container ID (other
		// agents may run on the same host, as kind's nodes do).
		var agents corev1.PodList
		Expect(cl.List(ctx, &agents, client.InNamespace(agentNamespace), client.MatchingLabels(labelsOf(agentSel)))).To(Succeed())
		var agentID string
		for _, p := range agents.Items {
			if p.Spec.NodeName == primaryNode() && p.DeletionTimestamp == nil && len(p.Status.ContainerStatuses) == 1 {
				agentID = p.Status.ContainerStatuses[0].ContainerID
			}
		}
		Expect(agentID).NotTo(BeEmpty(), "the agent pod of %s", primaryNode())
		agentTasks, err := containerTasks(ctx, agentID)
		Expect(err).NotTo(HaveOccurred())
		Expect(processes(agentTasks)).To(HaveLen(1), "the agent process")
		pid := strconv.Itoa(processes(agentTasks)[0])
		type usage struct {
			rssKiB, anonKiB, cpuTicks    int
			writes, leaseWrites, reads   float64
			heapInuse, goSys, goroutines float64
			series                       map[string]float64 // every write series
		}
		sample := func() (u usage) {
			GinkgoHelper()
			st, err := nodeShell(ctx, fmt.Sprintf(`awk '/^(VmRSS|RssAnon):/ {print $2}' /proc/%s/status; s=$(cat /proc/%s/stat); set -- ${s##*') '}; echo $((${12} + ${13}))`, pid, pid))
			Expect(err).NotTo(HaveOccurred(), st)
			f := strings.Fields(st)
			Expect(f).To(HaveLen(3), st)
			u.rssKiB, _ = strconv.Atoi(f[0])
			u.anonKiB, _ = strconv.Atoi(f[1])
			u.cpuTicks, _ = strconv.Atoi(f[2])
			u.series = map[string]float64{}
			body, err := nodeShell(ctx, agentCurl(agentCA, scraper, "/metrics"))
			Expect(err).NotTo(HaveOccurred())
			// The agent's own count of its API requests (numapref_api_requests_total).
			for _, line := range strings.Split(body, "\n") {
				if !strings.HasPrefix(line, "numapref_api_requests_total{") {
					continue
				}
				f := strings.Fields(line)
				v, _ := strconv.ParseFloat(f[len(f)-1], 64)
				switch {
				case strings.Contains(line, `method="GET"`):
					u.reads += v
				case strings.Contains(line, `resource="leases"`):
					u.leaseWrites += v
				case strings.Contains(line, `resource="tokenreviews"`), strings.Contains(line, `resource="subjectaccessreviews"`):
					// The metrics endpoint authenticating this very scrape: the observer's cost.
				case strings.Contains(line, `-dryrun"`):
					// The node restriction check's dry runs (every 10 minutes): nothing is stored.
				default:
					u.writes += v
					u.series[f[0]] = v
				}
			}
			u.heapInuse = metricValue(body, "go_memstats_heap_inuse_bytes")
			u.goSys = metricValue(body, "go_memstats_sys_bytes")
			u.goroutines = metricValue(body, "go_goroutines")
			return u
		}
		// Steady state starts once the agent's own write counters have not moved for 10 s:
		// Events and status writes of the burst may still drain through the client's rate
		// limiter for a while after the summary counts every pod.
		const quiet, window = 10 * time.Second, 60 * time.Second
		settle := time.Now()
		last, stableSince := sample(), time.Now()
		Eventually(func(g Gomega) {
			if u := sample(); !maps.Equal(u.series, last.series) {
				last, stableSince = u, time.Now()
			}
			g.Expect(time.Since(stableSince)).To(BeNumerically(">=", quiet), "agent API writes still moving: %v", last.series)
		}).WithContext(ctx).WithTimeout(5 * time.Minute).WithPolling(time.Second).Should(Succeed())
		logf("agent API writes settled %s after every pod was counted (unchanged for %s)", time.Since(settle).Round(time.Second), quiet)
		u0, windowStart := sample(), time.Now()
		// The window: no write for a minute, checked every 5 s so a write fails it at once.
		Consistently(func(g Gomega) {
			u := sample()
			g.Expect(u.series).To(Equal(u0.series), "API writes at steady state, lease renewals aside")
		}).WithContext(ctx).WithTimeout(window).WithPolling(5 * time.Second).Should(Succeed())
		u1, elapsed := sample(), time.Since(windowStart)
		cpuPct := float64(u1.cpuTicks-u0.cpuTicks) / 100 / elapsed.Seconds() * 100 // USER_HZ = 100
		var wrote []string
		for k, v := range u1.series {
			if d := v - u0.series[k]; d != 0 {
				wrote = append(wrote, fmt.Sprintf("%s +%.0f", k, d))
			}
		}
		logf("footprint, %d pods (%d+ tasks), rescan 2s, fork events on, over %s: VmRSS %.1f MiB of which anonymous %.1f MiB "+
			"(Go heap in use %.1f MiB, Go sys %.1f MiB, %0.f goroutines; the rest is the binary's file-backed text), CPU %.2f%% of one core; "+
			"API requests: %.0f writes %v, %.0f lease renewals, %.0f reads",
			pods, pods*3, elapsed.Round(time.Second), float64(u1.rssKiB)/1024, float64(u1.anonKiB)/1024, u1.heapInuse/(1<<20), u1.goSys/(1<<20), u1.goroutines, cpuPct,
			u1.writes-u0.writes, wrote, u1.leaseWrites-u0.leaseWrites, u1.reads-u0.reads)
		Expect(wrote).To(BeEmpty(), "API writes at steady state, lease renewals aside")
		Expect(u1.leaseWrites-u0.leaseWrites).To(BeNumerically("<=", 5), "lease renewals: one per 15 s")
		// The private memory: VmRSS also counts the pages of the 60+ MB static binary's text
		// the agent has touched, which are file-backed, shared and reclaimable.
		Expect(u1.anonKiB).To(BeNumerically("<=", 40*1024), "agent anonymous RSS in KiB")

		out, err := kubectl(ctx, "delete", "numapref", "e2e-scale", "-n", ns)
		Expect(err).NotTo(HaveOccurred(), out)
		out, err = kubectl(ctx, "delete", "pod", "-n", ns, "-l", "app=e2e-scale", "--wait=true", "--timeout=5m")
		Expect(err).NotTo(HaveOccurred(), out)
	}, SpecTimeout(20*time.Minute))
})

func ptr[T any](v T) *T { return &v }

// labelsOf parses a "k=v,k2=v2" selector of equalities.
// reportEntry is the entry of NumaPreference namespace/name in a node's report, nil if it
// has none.
func reportEntry(rep *numav1.NumaNodeReport, namespace, name string) *numav1.PreferenceReport {
	for i, e := range rep.Status.Preferences {
		if e.Namespace == namespace && e.Name == name {
			return &rep.Status.Preferences[i]
		}
	}
	return nil
}

func labelsOf(sel string) map[string]string {
	m := map[string]string{}
	for _, kv := range strings.Split(sel, ",") {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	return m
}

// agentAddr is where the agent of the primary node listens (agentAddress).
var agentAddr string

// agentAddress is the address the agent of the primary node listens on: the provider's
// (127.0.0.1 on the local node, bindAddress), else the node's own IP, its pod's
// status.hostIP, which the chart binds by default.
func agentAddress(ctx context.Context) string {
	GinkgoHelper()
	if u := prov.agentURL(); u != "" {
		parsed, err := url.Parse(u)
		Expect(err).NotTo(HaveOccurred())
		return parsed.Hostname()
	}
	out, err := kubectl(ctx, "get", "pods", "-n", agentNamespace, "--field-selector", "spec.nodeName="+primaryNode(),
		"-o", "jsonpath={.items[0].status.hostIP}")
	Expect(err).NotTo(HaveOccurred(), out)
	ip := strings.TrimSpace(out)
	Expect(net.ParseIP(ip)).NotTo(BeNil(), "the agent pod's hostIP %q", ip)
	if strings.Contains(ip, ":") {
		return "[" + ip + "]"
	}
	return ip
}

// agentCurl is a node shell script that GETs path from the agent on this node with token,
// verifying its certificate with caPEM as the node's own (the chart's per-node
// certificates: the node's name, whatever address is dialled), and prints the body, then
// "HTTP <status>".
func agentCurl(caPEM, token, path string) string {
	return agentCurlAt(agentAddr, caPEM, token, path)
}

// agentCurlAt is agentCurl for an agent listening on addr (port 8443).
func agentCurlAt(addr, caPEM, token, path string) string {
	return fmt.Sprintf(`ca=$(mktemp) && cat >"$ca" <<'EOF'
%s
EOF
curl -s --cacert "$ca" --connect-to %[2]s:8443:%[5]s:8443 -w '\nHTTP %%{http_code}\n' -H "Authorization: Bearer %[3]s" https://%[2]s:8443%[4]s
rc=$?; rm -f "$ca"; exit $rc`, strings.TrimSpace(caPEM), primaryNode(), token, path, addr)
}

// metricValue returns the value of the sample line starting with series, or -1.
func metricValue(body, series string) float64 {
	for _, line := range strings.Split(body, "\n") {
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			if err == nil {
				return v
			}
		}
	}
	return -1
}

// signalWorkload sends signal sig (a kill(1) name) to the workload process of the local
// node's container containerID.
func signalWorkload(ctx context.Context, containerID, sig string) {
	GinkgoHelper()
	tasks, err := containerTasks(ctx, containerID)
	Expect(err).NotTo(HaveOccurred())
	// The container's first process is the workload itself (pid 1 in its namespace).
	main := slices.Min(processes(tasks))
	out, err := nodeShell(ctx, fmt.Sprintf("kill -%s %d", sig, main))
	Expect(err).NotTo(HaveOccurred(), out)
}

// makeInspector creates the ServiceAccount e2e-inspector in namespace, which may use the
// agents' inspect endpoint (the chart's inspect-reader ClusterRole, bound by
// ClusterRoleBinding binding) and read the pods of that namespace only.
func makeInspector(ctx context.Context, namespace, binding string) {
	GinkgoHelper()
	for _, args := range [][]string{
		{"create", "serviceaccount", "e2e-inspector", "-n", namespace},
		{"create", "clusterrolebinding", binding, "--clusterrole=" + release + "-inspect-reader", "--serviceaccount=" + namespace + ":e2e-inspector"},
		{"create", "role", "e2e-pod-reader", "-n", namespace, "--verb=get", "--resource=pods"},
		{"create", "rolebinding", "e2e-inspector", "-n", namespace, "--role=e2e-pod-reader", "--serviceaccount=" + namespace + ":e2e-inspector"},
	} {
		out, err := kubectl(ctx, args...)
		Expect(err).NotTo(HaveOccurred(), out)
	}
}
