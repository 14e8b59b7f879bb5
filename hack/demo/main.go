// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

// Command demo runs numapref's main job end to end on a real node on this machine: it
// brings up a single-node cluster (test/localnode: etcd, the control plane, kubelet,
// containerd 2.x with NRI from -runtime-dir, or Debian's containerd 1.6 without it),
// installs the chart with Helm (emulated kernel: this one lacks the patch; NRI on),
// starts a multi-threaded pod, applies the sample NumaPreference with kubectl, and shows
// what happened: `kubectl get numapref`, Events, node labels, every task's forced node as
// the (emulated) kernel sees it, a forked child being placed, a pod created after its
// preference placed at its start and created with the real memory policy of its home (on
// this machine's own kernel), and the undo. Then it tears the node down, unless -keep.
//
//	make demo      (needs root)
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/numapref/numapref/internal/numa"
	"github.com/numapref/numapref/internal/testutil/poll"
	"github.com/numapref/numapref/test/kindnode"
	"github.com/numapref/numapref/test/localnode"
)

const (
	emulatorView = "/run/numapref/emulator/proc" // the chart's /run/numapref hostPath
	samplePref   = "config/samples/numa_v1alpha1_numapreference.yaml"
	podManifest  = `apiVersion: v1
kind: Pod
metadata:
  name: db
  namespace: default
  labels: {app: db}
spec:
  containers:
  - name: postgres
    image: ` + localnode.WorkloadImage + `
    imagePullPolicy: Never
    args: ["work", "-threads", "8"]
`
	// Who inspects: a service account that may use the agents' inspect endpoint and read
	// the pods of namespace default only. The admin (a static token, no service account)
	// asks for its tokens with --token-service-account.
	inspectorManifest = `apiVersion: v1
kind: ServiceAccount
metadata: {name: inspector, namespace: default}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: demo-inspector}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: numapref-inspect-reader}
subjects: [{kind: ServiceAccount, name: inspector, namespace: default}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: pod-reader, namespace: default}
rules: [{apiGroups: [""], resources: [pods], verbs: [get]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: inspector-pod-reader, namespace: default}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: pod-reader}
subjects: [{kind: ServiceAccount, name: inspector, namespace: default}]
`
)

func main() {
	binDir := flag.String("bin-dir", "", "Kubernetes binaries (hack/k8s-binaries.sh all)")
	helmBin := flag.String("helm", "helm", "the helm binary")
	keep := flag.Bool("keep", false, "leave the node up (tear it down with make local-down)")
	runtimeDir := flag.String("runtime-dir", "", "containerd 2.x with NRI and runc (hack/runtime-binaries.sh); empty: Debian's containerd 1.6, without NRI")
	flag.Parse()
	if err := run(*binDir, *helmBin, *runtimeDir, *keep); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

type demo struct {
	ctx                context.Context
	kubectl, helm, cfg string
}

func step(heading string) { fmt.Printf("\n==> %s\n", heading) }

func run(binDir, helmBin, runtimeDir string, keep bool) (err error) { //nolint:funlen // the demo's steps in the order it prints them, one step() each
	if os.Geteuid() != 0 {
		return errors.New("needs root: it runs kubelet and containerd")
	}
	if binDir == "" {
		return errors.New("-bin-dir is required: use `make demo`")
	}
	ctx := context.Background()
	tmp, err := os.MkdirTemp("", "numapref-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)

	step("Building the agent, workload and pause images (static binaries, no Docker)")
	images, err := localnode.BuildImages(ctx, ".", tmp)
	if err != nil {
		return err
	}
	plugin := filepath.Join(tmp, "kubectl-numapref")
	if out, err := exec.Command("go", "build", "-o", plugin, "./cmd/kubectl-numapref").CombinedOutput(); err != nil {
		return fmt.Errorf("building kubectl-numapref: %v: %s", err, out)
	}
	step("Bringing up a real single-node cluster: etcd, kube-apiserver, controller-manager, scheduler, containerd, kubelet")
	logf := func(f string, a ...any) { fmt.Printf("    "+f+"\n", a...) }
	if _, err := kindnode.ReclaimOrphan(ctx, kindnode.DefaultDir, logf); err != nil {
		return err
	}
	node, err := localnode.UpRuntime(ctx, localnode.DefaultDir, binDir, runtimeDir, images, logf)
	if err != nil {
		return err
	}
	defer func() {
		if keep {
			fmt.Printf("\nThe node stays up: export KUBECONFIG=%s; tear it down with make local-down\n", node.Kubeconfig())
			return
		}
		step("Tearing the node down")
		err = errors.Join(err, node.Down(logf))
	}()
	d := &demo{ctx: ctx, kubectl: filepath.Join(binDir, "kubectl"), helm: helmBin, cfg: node.Kubeconfig()}

	values := append(localnode.ChartValues(), "kernel=emulated", "rescanInterval=2s")
	if runtimeDir != "" {
		values = append(values, "nri.socket="+node.NRISocket())
	}
	step("helm install numapref (kernel=emulated)")
	install := []string{"install", "numapref", "charts/numapref", "-n", "numapref-system", "--create-namespace", "--wait"}
	for _, v := range values {
		install = append(install, "--set", v)
	}
	if err := d.show(d.helm, install...); err != nil {
		return err
	}
	if err := d.show(d.kubectl, "-n", "numapref-system", "get", "pods", "-o", "wide"); err != nil {
		return err
	}

	step("Who may inspect: a service account that may read the pods of namespace default")
	if err := d.apply(inspectorManifest); err != nil {
		return err
	}

	step("A pod with 8 worker threads, and the sample NumaPreference (app=db -> NUMA node 0)")
	if err := d.apply(podManifest); err != nil {
		return err
	}
	if err := d.show(d.kubectl, "wait", "--for=condition=Ready", "pod/db", "--timeout=60s"); err != nil {
		return err
	}
	if err := d.show(d.kubectl, "apply", "-f", samplePref); err != nil {
		return err
	}
	if err := d.show(d.kubectl, "wait", "--for=condition=Ready", "numapref/db", "--timeout=60s"); err != nil {
		return err
	}
	// The summary counts the pod once the node's report has it and the summarizer has
	// added it up: until then the TASKS column is empty.
	if err := d.show(d.kubectl, "wait", "--for=jsonpath={.status.summary.pods}=1", "numapref/db", "--timeout=60s"); err != nil {
		return err
	}
	step("kubectl get numapref")
	if err := d.show(d.kubectl, "get", "numapref", "-o", "wide"); err != nil {
		return err
	}
	step("Events and node labels")
	if err := d.show(d.kubectl, "get", "events", "--field-selector", "involvedObject.name=db", "-o",
		"custom-columns=REASON:.reason,OBJECT:.involvedObject.kind,MESSAGE:.message"); err != nil {
		return err
	}
	if err := d.show(d.kubectl, "get", "nodes", "-L", "numapref.io/kernel-support,numapref.io/numa-balancing,numapref.io/numa-nodes,numapref.io/nri,numapref.io/memory-policy"); err != nil {
		return err
	}
	step("Every task of the container, as the (emulated) kernel sees it")
	id, err := d.output(d.kubectl, "get", "pod", "db", "-o", "jsonpath={.status.containerStatuses[0].containerID}")
	if err != nil {
		return err
	}
	_, id, _ = strings.Cut(id, "://")
	if err := printTasks(id); err != nil {
		return err
	}
	step("The same pod through the agent's eyes: kubectl numapref inspect, TLS verified with the chart's CA (the agent listens on 127.0.0.1 here)")
	if err := d.show(plugin, "inspect", "default/db", "--agent-url", "https://127.0.0.1:8443", "--token-service-account", "default/inspector"); err != nil {
		return err
	}
	step("The workload forks a child (fork(): the kernel resets it to -1); the agent places it")
	pids, _ := containerProcesses(id)
	if len(pids) == 0 {
		return fmt.Errorf("no processes in container %s", id)
	}
	start := time.Now()
	if err := exec.Command("kill", "-USR1", strconv.Itoa(slices.Min(pids))).Run(); err != nil {
		return err
	}
	if err := waitTasks(id, len(pids)+1, 0, 20*time.Second); err != nil {
		return err
	}
	fmt.Printf("    child placed %s after the fork signal\n", time.Since(start).Round(time.Millisecond))
	if err := printTasks(id); err != nil {
		return err
	}
	if runtimeDir != "" {
		if err := d.createdAfter(plugin); err != nil {
			return err
		}
	}
	step("kubectl delete numapref db: the agent puts every task back")
	if err := d.show(d.kubectl, "delete", "-f", samplePref, "--wait"); err != nil {
		return err
	}
	if err := waitTasks(id, len(pids)+1, -1, 30*time.Second); err != nil {
		return err
	}
	return printTasks(id)
}

// webManifest is a pod whose annotations give it node 0 and a memory policy at creation.
const webManifest = `apiVersion: v1
kind: Pod
metadata:
  name: web
  namespace: default
  annotations: {numapref.io/preferred-node: "0", numapref.io/memory-policy: AtCreation}
spec:
  containers:
  - name: web
    image: ` + localnode.WorkloadImage + `
    imagePullPolicy: Never
    args: ["work", "-threads", "2"]
`

// createdAfter shows a pod created after what selects it, on containerd 2.x: the agent,
// the runtime's NRI plugin, places it at its start (before its first instruction) and has
// the runtime create it with its home's memory policy, which this machine's own kernel
// holds (no emulator there: /proc/<pid>/numa_maps).
func (d *demo) createdAfter(plugin string) error {
	step("A pod created after what selects it (its annotations: node 0, memory policy AtCreation): placed at its start through NRI, created with its home's memory policy")
	if err := d.apply(webManifest); err != nil {
		return err
	}
	if err := d.show(d.kubectl, "wait", "--for=condition=Ready", "pod/web", "--timeout=60s"); err != nil {
		return err
	}
	id, err := d.output(d.kubectl, "get", "pod", "web", "-o", "jsonpath={.status.containerStatuses[0].containerID}")
	if err != nil {
		return err
	}
	_, id, _ = strings.Cut(id, "://")
	if err := waitTasks(id, 1, 0, 20*time.Second); err != nil {
		return err
	}
	pids, err := containerProcesses(id)
	if err != nil || len(pids) == 0 {
		return fmt.Errorf("no processes in container %s: %v", id, err)
	}
	first, err := firstLine(filepath.Join("/proc", strconv.Itoa(slices.Min(pids)), "numa_maps"))
	if err != nil {
		return err
	}
	fmt.Printf("$ head -n 1 /proc/%d/numa_maps   (the kernel's own view: the policy is real, not emulated)\n    %s\n", slices.Min(pids), first)
	if err := d.show(plugin, "inspect", "default/web", "--agent-url", "https://127.0.0.1:8443", "--token-service-account", "default/inspector"); err != nil {
		return err
	}
	return d.show(d.kubectl, "delete", "pod", "web", "--wait")
}

// firstLine is the first line of file path.
func firstLine(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	return line, nil
}

func (d *demo) cmd(bin string, args ...string) *exec.Cmd {
	c := exec.CommandContext(d.ctx, bin, args...)
	c.Env = append(os.Environ(), "KUBECONFIG="+d.cfg)
	return c
}

// show runs a command with its output indented under the step.
func (d *demo) show(bin string, args ...string) error {
	fmt.Printf("$ %s %s\n", filepath.Base(bin), strings.Join(args, " "))
	out, err := d.cmd(bin, args...).CombinedOutput()
	for _, line := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		fmt.Println("    " + line)
	}
	return err
}

func (d *demo) output(bin string, args ...string) (string, error) {
	out, err := d.cmd(bin, args...).Output()
	return strings.TrimSpace(string(out)), err
}

func (d *demo) apply(manifest string) error {
	c := d.cmd(d.kubectl, "apply", "-f", "-")
	c.Stdin = strings.NewReader(manifest)
	out, err := c.CombinedOutput()
	fmt.Print("    " + string(out))
	return err
}

// containerProcesses finds a container's processes by its ID in /proc/<pid>/cgroup.
func containerProcesses(id string) ([]int, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cgroup")); err == nil && strings.Contains(string(b), id) {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

type taskNode struct{ pid, tid, node int }

// containerTasks reads each task's forced node from the emulator's kernel-shaped view (no
// entry: the task holds -1).
func containerTasks(id string) ([]taskNode, error) {
	pids, err := containerProcesses(id)
	if err != nil {
		return nil, err
	}
	var out []taskNode
	for _, pid := range pids {
		tids, _ := numa.ListThreads("/proc", pid)
		for _, tid := range tids {
			node := numa.NoNode
			if s, err := numa.ReadSchedNUMA(filepath.Join(emulatorView, strconv.Itoa(pid), "task"), tid); err == nil && s.ForcePresent {
				node = s.PreferredNIDForce
			}
			out = append(out, taskNode{pid, tid, node})
		}
	}
	return out, nil
}

func printTasks(id string) error {
	tasks, err := containerTasks(id)
	if err != nil {
		return err
	}
	fmt.Printf("    %-8s %-8s %s\n", "PID", "TID", "FORCED-NODE")
	for _, t := range tasks {
		fmt.Printf("    %-8d %-8d %d\n", t.pid, t.tid, t.node)
	}
	return nil
}

// waitTasks waits until the container has at least procs processes and every task holds node.
func waitTasks(id string, procs, node int, timeout time.Duration) error {
	var tasks []taskNode
	err := poll.Until(timeout, func() error {
		pids, _ := containerProcesses(id)
		var err error
		tasks, err = containerTasks(id)
		ok := err == nil && len(pids) >= procs && len(tasks) > 0
		for _, t := range tasks {
			ok = ok && t.node == node
		}
		if !ok {
			return errors.New("not yet")
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("tasks of %s did not all reach node %d in %s: %v", id, node, timeout, tasks)
	}
	return nil
}
