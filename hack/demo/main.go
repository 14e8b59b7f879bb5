// Command demo runs numapref's main job on this machine, end to end with real parts: a real
// kube-apiserver and etcd, the real agent binary, real processes in real cgroups shaped the
// way kubelet makes them, and the kernel emulator (this kernel lacks the patch). It plays
// the kubelet's part itself: it creates the cgroups and processes of the pods it creates.
//
//	KUBEBUILDER_ASSETS=$(hack/k8s-binaries.sh) go run ./hack/demo   (make demo)
package main

import (
	"context"
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/internal/hostlab"
	"github.com/numapref/numapref/internal/numa"
)

const nodeName = "demo-node"

func main() {
	hostlab.RunWorkloadIfAsked()
	agentBin := flag.String("agent", "bin/numapref", "the numapref binary to run as the agent")
	flag.Parse()
	if err := run(*agentBin); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

type demo struct {
	ctx      context.Context
	c        client.Client
	kubectl  string
	kubecfg  string
	emuState string
	lab      *hostlab.Lab
}

func step(format string, args ...any) { fmt.Printf("\n==> "+format+"\n", args...) }

func run(agentBin string) error {
	if os.Geteuid() != 0 {
		return errors.New("needs root: it makes cgroups and runs processes in them")
	}
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		return errors.New("KUBEBUILDER_ASSETS is not set: use `make demo`")
	}
	work, err := os.MkdirTemp("", "numapref-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	d := &demo{ctx: context.Background(), kubectl: filepath.Join(assets, "kubectl"),
		kubecfg: filepath.Join(work, "kubeconfig"), emuState: filepath.Join(work, "emulator")}

	step("Starting kube-apiserver and etcd (built from the module proxy) with the NumaPreference CRD")
	env := &envtest.Environment{CRDDirectoryPaths: []string{"config/crd/bases"}, ErrorIfCRDPathMissing: true}
	cfg, err := env.Start()
	if err != nil {
		return fmt.Errorf("starting the apiserver: %w", err)
	}
	defer env.Stop()
	user, err := env.AddUser(envtest.User{Name: "demo-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return err
	}
	kc, err := user.KubeConfig()
	if err != nil {
		return err
	}
	if err := os.WriteFile(d.kubecfg, kc, 0o600); err != nil {
		return err
	}
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = numav1.AddToScheme(scheme)
	if d.c, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		return err
	}
	if err := d.c.Create(d.ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName}}); err != nil {
		return err
	}

	if d.lab, err = hostlab.New("/sys/fs/cgroup"); err != nil {
		return err
	}
	defer d.lab.Close()

	step("Starting three pods' processes in kubepods cgroups (the kubelet's part): db-0 (8 threads), cache-0 (annotated), web-0 (not selected)")
	db, dbWork, err := d.startPod("db-0", map[string]string{"app": "db"}, nil, 8)
	if err != nil {
		return err
	}
	cache, cacheWork, err := d.startPod("cache-0", map[string]string{"app": "cache"},
		map[string]string{numav1.AnnotationPreferredNode: "0"}, 3)
	if err != nil {
		return err
	}
	other, otherWork, err := d.startPod("web-0", map[string]string{"app": "web"}, nil, 2)
	if err != nil {
		return err
	}

	step("Starting the agent: %s agent --kernel=emulated (this kernel has no PR_PREFERRED_NID)", agentBin)
	agent := exec.Command(agentBin, "agent", "--kubeconfig", d.kubecfg, "--node-name", nodeName,
		"--kernel", "emulated", "--emulator-state-dir", d.emuState, "--state-dir", filepath.Join(work, "state"),
		"--cgroup-driver", "cgroupfs", "--kubelet-cgroup-root", d.lab.KubeletCgroupRoot(),
		"--rescan-interval", "5s", "--metrics-bind-address", "0", "--health-probe-bind-address", "0",
		"--leader-elect=false")
	logf, err := os.Create(filepath.Join(work, "agent.log"))
	if err != nil {
		return err
	}
	agent.Stdout, agent.Stderr = logf, logf
	if err := agent.Start(); err != nil {
		return fmt.Errorf("starting the agent: %w", err)
	}
	defer func() {
		agent.Process.Signal(syscall.SIGTERM)
		agent.Wait()
	}()
	fail := func(err error) error {
		log, _ := os.ReadFile(logf.Name())
		return fmt.Errorf("%w\n--- agent log ---\n%s", err, log)
	}

	step("kubectl apply -f config/samples/numa_v1alpha1_numapreference.yaml")
	if err := d.kubectlRun("apply", "-n", "default", "-f", "config/samples/numa_v1alpha1_numapreference.yaml"); err != nil {
		return err
	}
	if err := d.wait("db-0 and cache-0 at node 0", func() (bool, error) {
		a, err := d.allAt(0, dbWork.Pid())
		if err != nil || !a {
			return a, err
		}
		return d.allAt(0, cacheWork.Pid())
	}); err != nil {
		return fail(err)
	}
	if err := d.wait("the NumaPreference to be Ready", func() (bool, error) {
		var p numav1.NumaPreference
		if err := d.c.Get(d.ctx, client.ObjectKey{Namespace: "default", Name: "db"}, &p); err != nil {
			return false, err
		}
		for _, c := range p.Status.Conditions {
			if c.Type == numav1.ConditionReady && c.Status == metav1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		return fail(err)
	}
	step("kubectl get numapref")
	d.kubectlRun("get", "numapref", "-n", "default")
	step("kubectl get node %s -L numapref.io/... (kernel facts the agent published as labels)", nodeName)
	d.kubectlRun("get", "node", nodeName, "-L", "numapref.io/kernel-support,numapref.io/numa-balancing,numapref.io/numa-nodes")
	step("Events on the pods")
	d.kubectlRun("get", "events.events.k8s.io", "-n", "default", "-o", "custom-columns=OBJECT:.regarding.name,REASON:.reason,NOTE:.note")
	step("Every task, as the emulated kernel shows it (numa_preferred_nid_force per thread)")
	for _, w := range []struct {
		pod string
		pid int
	}{{db.Name, dbWork.Pid()}, {cache.Name, cacheWork.Pid()}, {other.Name, otherWork.Pid()}} {
		d.printTasks(w.pod, w.pid)
	}

	step("db-0 forks: sh (a CLONE_VM child) and sleep (a real fork(): the kernel resets it to -1)")
	start := time.Now()
	shell, forked, err := dbWork.Fork()
	if err != nil {
		return err
	}
	if err := d.wait("the children at node 0", func() (bool, error) { return d.allAt(0, shell, forked) }); err != nil {
		return fail(err)
	}
	fmt.Printf("children %d and %d prefer node 0, %v after the fork (fork events)\n", shell, forked, time.Since(start).Round(time.Millisecond))

	step("kubectl delete numapref db: the agent undoes what it set (the annotated pod keeps its node)")
	if err := d.kubectlRun("delete", "numapref", "db", "-n", "default"); err != nil {
		return err
	}
	if err := d.wait("db-0 back at -1", func() (bool, error) { return d.allAt(-1, dbWork.Pid(), shell, forked) }); err != nil {
		return fail(err)
	}
	d.printTasks(db.Name, dbWork.Pid())
	d.printTasks(cache.Name, cacheWork.Pid())
	step("Done: stopping the agent, the processes, the apiserver; removing the cgroups")
	return nil
}

// startPod creates a pod bound to the demo node, its container cgroup and a workload in it,
// and reports the container running the way the kubelet would.
func (d *demo) startPod(name string, labels, annotations map[string]string, threads int) (*corev1.Pod, *hostlab.Workload, error) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Labels: labels, Annotations: annotations},
		Spec:       corev1.PodSpec{NodeName: nodeName, Containers: []corev1.Container{{Name: "main", Image: "demo.invalid/app"}}},
	}
	if err := d.c.Create(d.ctx, pod); err != nil {
		return nil, nil, err
	}
	id := fmt.Sprintf("%x", sha256.Sum256([]byte(pod.UID))) // a containerd-shaped id
	c, err := d.lab.Container(pod.Status.QOSClass, string(pod.UID), id)
	if err != nil {
		return nil, nil, err
	}
	w, err := c.StartWorkload(threads)
	if err != nil {
		return nil, nil, err
	}
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "main", ContainerID: c.ContainerID,
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}}}
	if err := d.c.Status().Update(d.ctx, pod); err != nil {
		return nil, nil, err
	}
	return pod, w, nil
}

// value reads a task's forced node from the emulator's read-only, kernel-shaped view.
func (d *demo) value(pid, tid int) int {
	s, err := numa.ReadSchedNUMA(filepath.Join(d.emuState, "proc", fmt.Sprint(pid), "task"), tid)
	if err != nil || !s.ForcePresent {
		return -1 // no entry: the emulated kernel holds the default
	}
	return s.PreferredNIDForce
}

func (d *demo) allAt(node int, pids ...int) (bool, error) {
	for _, pid := range pids {
		tids, err := hostlab.TasksOf(pid)
		if err != nil {
			return false, err
		}
		for _, tid := range tids {
			if d.value(pid, tid) != node {
				return false, nil
			}
		}
	}
	return true, nil
}

func (d *demo) printTasks(pod string, pid int) {
	tids, _ := hostlab.TasksOf(pid)
	slices.Sort(tids)
	var parts []string
	for _, tid := range tids {
		parts = append(parts, fmt.Sprintf("%d:%d", tid, d.value(pid, tid)))
	}
	fmt.Printf("%-8s pid %-6d tid:node %s\n", pod, pid, strings.Join(parts, " "))
}

func (d *demo) kubectlRun(args ...string) error {
	cmd := exec.Command(d.kubectl, append([]string{"--kubeconfig", d.kubecfg}, args...)...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("kubectl %s: %w", strings.Join(args, " "), err)
	}
	return nil
}

func (d *demo) wait(what string, cond func() (bool, error)) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		ok, err := cond()
		if err != nil {
			return fmt.Errorf("waiting for %s: %w", what, err)
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
