// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build linux && kernellab

package agent

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/uuid"
	"sigs.k8s.io/controller-runtime/pkg/client"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/internal/testutil/hostlab"
	"github.com/numapref/numapref/test/kernellab/labenv"
	"github.com/numapref/numapref/test/localnode"
)

// What TestCRIPod needs in the initramfs besides the agent's files (hack/kernel/lab.sh puts
// them there from hack/runtime-binaries.sh, all static): containerd 2.x with NRI, its runc
// shim, runc, ctr to import the images, crictl, and the workload binary the images are made
// of (test/e2e/workload).
var criFiles = []string{"containerd", "containerd-shim-runc-v2", "runc", "ctr", "crictl", "workload"}

// criNode is the preference's node: neither -1 (no preference) nor 0, where a task that
// nothing placed could also be.
const criNode = 1

// TestCRIPod runs containerd and runc in the patched VM, the agent as containerd's NRI
// plugin (--nri-socket), and starts pods through CRI with crictl as a kubelet would: host
// network (the VM has no CNI), the kubelet's cgroup layout. Nothing puts the pods in the
// API, so only the runtime's StartContainer can tell the agent about them. Each pod's
// container runs `workload first-node`, whose first action is a prctl GET of its own
// preferred node: the selected pod must read the preference's node there, and a pod the
// preference does not select must read -1 in the same runtime, so the check can fail.
func TestCRIPod(t *testing.T) {
	cl, lab, rt := startCRIAgent(t, "patched", "cri-first", func(rep *numav1.NumaNodeReport) error {
		if rep.Status.NRI != numav1.NRIConnected {
			return fmt.Errorf("the node's report says NRI %q", rep.Status.NRI)
		}
		return nil
	})

	selected, selectedPolicy := rt.runPod(t, lab, "cri-selected", map[string]string{"app": "cri-first"})
	unselected, _ := rt.runPod(t, lab, "cri-unselected", map[string]string{"app": "cri-other"})
	mfs, err := cl.metrics()
	if err != nil {
		t.Fatal(err)
	}
	starts, _ := series(mfs, "numapref_nri_container_starts_total", nil)
	late, _ := series(mfs, "numapref_nri_late_placements_total", nil)
	fmt.Printf("cripod first-node=%s unselected=%s nri_starts=%.0f late=%.0f\n", selected, unselected, starts, late)
	if want := fmt.Sprint(criNode); selected != want {
		t.Errorf("the selected pod's first instruction read node %s, want %s", selected, want)
	}
	if unselected != "-1" {
		t.Errorf("the pod no preference selects read node %s at its first instruction, want -1", unselected)
	}
	// memoryPolicy Auto: where the prctl is, the prctl alone acts.
	if selectedPolicy != "default" {
		t.Errorf("the selected pod's memory policy at its first instruction is %s on the patched kernel with memoryPolicy Auto, want default", selectedPolicy)
	}
}

// TestCRIPolicy runs containerd and runc on the control kernel (Debian's, without the
// patch, two NUMA nodes), the agent as containerd's NRI plugin, and starts pods through CRI
// as TestCRIPod does. The kernel cannot take the prctl, so memoryPolicy Auto gives the
// selected pod's container the memory policy of its home at creation: its first
// instruction reads it with get_mempolicy(2), MPOL_PREFERRED_MANY with
// MPOL_F_NUMA_BALANCING on node 1 (the kernel is 6.12); the pod the preference does not
// select reads the default policy in the same runtime.
func TestCRIPolicy(t *testing.T) {
	// The selected pod is created only once the agent's cache holds the preference: the
	// report it writes after its first pass has the node's mechanisms.
	cl, lab, rt := startCRIAgent(t, "control", "cri-policy", func(rep *numav1.NumaNodeReport) error {
		if !slices.Contains(rep.Status.Mechanisms, "memoryPolicy") || slices.Contains(rep.Status.Mechanisms, "prctl") {
			return fmt.Errorf("the node's report says mechanisms %v, want memoryPolicy alone", rep.Status.Mechanisms)
		}
		return nil
	})
	_, selected := rt.runPod(t, lab, "cri-policy-selected", map[string]string{"app": "cri-policy"})
	_, unselected := rt.runPod(t, lab, "cri-policy-unselected", map[string]string{"app": "cri-other"})
	mfs, err := cl.metrics()
	if err != nil {
		t.Fatal(err)
	}
	creates, _ := series(mfs, "numapref_nri_container_creates_total", nil)
	policies, _ := series(mfs, "numapref_nri_memory_policies_total", nil)
	fmt.Printf("cripolicy selected=%q unselected=%q nri_creates=%.0f nri_memory_policies=%.0f\n", selected, unselected, creates, policies)
	// MPOL_PREFERRED_MANY with balancing where the kernel takes it, MPOL_PREFERRED else.
	if many, one := fmt.Sprintf("prefer (many)=balancing:%d", criNode), fmt.Sprintf("prefer:%d", criNode); selected != many && selected != one {
		t.Errorf("the selected pod's first instruction read memory policy %q, want %q or %q", selected, many, one)
	}
	if unselected != "default" {
		t.Errorf("the pod no preference selects read memory policy %q at its first instruction, want default", unselected)
	}
	if policies != 1 {
		t.Errorf("numapref_nri_memory_policies_total %v, want 1 (the selected pod's container)", policies)
	}
}

// startCRIAgent starts, on the lab's kernel kernel, containerd with NRI and the agent as
// its NRI plugin, with the NumaPreference pref (node criNode, selecting app=pref) made
// before the agent starts, so that the cache it lists at start holds it. It returns once
// the agent is registered (its own metric) and its node's report, written after it handed
// the engine its desired state, passes reportOK.
func startCRIAgent(t *testing.T, kernel, pref string, reportOK func(*numav1.NumaNodeReport) error) (*cluster, *hostlab.Lab, *criRuntime) {
	t.Helper()
	labenv.RequireKernel(t, kernel)
	cl := newCluster(t, kernel)
	lab := newHostlab(t)
	rt := startRuntime(t, cl)
	cl.applyPreference(t, pref, map[string]string{"app": pref}, criNode)
	t.Cleanup(func() { cl.deletePreference(t, pref) })
	cl.startAgent(t, lab, "--nri-socket="+rt.nriSocket())
	poll(t, apiWait, "the agent registered with containerd's NRI", func() error {
		mfs, err := cl.metrics()
		if err != nil {
			return err
		}
		if v, _ := series(mfs, "numapref_nri_connected", nil); v != 1 {
			return fmt.Errorf("numapref_nri_connected %v", v)
		}
		var rep numav1.NumaNodeReport
		if err := cl.c.Get(context.Background(), client.ObjectKey{Name: cl.node}, &rep); err != nil {
			return err
		}
		return reportOK(&rep)
	})
	return cl, lab, rt
}

// criRuntime is containerd with NRI, running in the VM with its root, state and sockets in a
// directory of its own (the local node's layout: test/localnode).
type criRuntime struct {
	node *localnode.Node
	logs string // where containerd's and the pods' logs go
}

// startRuntime writes the local node's containerd 2.x config for the VM (the native
// snapshotter, runc without pivot_root: the root is the initramfs), starts containerd,
// waits for its API and NRI socket, and imports the pause and workload images. containerd
// is stopped at cleanup, after the pods (runPod) are removed.
func startRuntime(t *testing.T, cl *cluster) *criRuntime {
	t.Helper()
	for _, f := range criFiles {
		if _, err := os.Stat(file(f)); err != nil {
			t.Fatalf("%s is not in the initramfs (hack/kernel/lab.sh puts it there): %v", f, err)
		}
	}
	// containerd copies the host's /etc/hosts into each host-network pod; the initramfs has none.
	if err := os.MkdirAll("/etc", 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat("/etc/hosts"); errors.Is(err, os.ErrNotExist) {
		if err := os.WriteFile("/etc/hosts", []byte("127.0.0.1 localhost\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	rt := &criRuntime{node: &localnode.Node{Dir: filepath.Join(cl.tmp, "runtime"), RuntimeDir: filesDir}, logs: reportDir(cl)}
	d := rt.node.Dir
	for _, sub := range []string{"containerd/root", "containerd/state", "nri/plugins", "nri/conf.d", "images"} {
		if err := os.MkdirAll(filepath.Join(d, sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	config := filepath.Join(d, "containerd/config.toml")
	opts := localnode.ContainerdOptions{Snapshotter: "native", NoPivotRoot: true}
	if err := os.WriteFile(config, []byte(localnode.ContainerdConfigV3(d, filesDir, opts)), 0o600); err != nil {
		t.Fatal(err)
	}
	log, err := os.Create(filepath.Join(rt.logs, "containerd.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	cmd := exec.Command(file("containerd"), "--config", config)
	cmd.Env = append(os.Environ(), "PATH="+filesDir+":"+os.Getenv("PATH"))
	cmd.Stdout, cmd.Stderr = log, log
	started := time.Now()
	startDaemon(t, "containerd", cmd, log.Name(), func() error {
		if out, err := rt.ctr("version"); err != nil {
			return fmt.Errorf("ctr version: %v: %s", err, out)
		}
		_, err := os.Stat(rt.nriSocket())
		return err
	})
	t.Logf("containerd ready after %s (log %s)", time.Since(started).Round(time.Millisecond), log.Name())
	images := []localnode.Image{
		{Ref: localnode.PauseImage, Binary: file("workload"), Path: "/workload", Cmd: []string{"pause"}},
		{Ref: localnode.WorkloadImage, Binary: file("workload"), Path: "/workload", Cmd: []string{"work"}},
	}
	for i, im := range images {
		tarball := filepath.Join(d, "images", fmt.Sprintf("%d.tar", i))
		if err := im.WriteTarball(tarball); err != nil {
			t.Fatal(err)
		}
		// Unpacked for the CRI's snapshotter by ctr itself (--local): containerd's transfer
		// service unpacks only for its configured default, overlayfs, absent here.
		if out, err := rt.ctr("-n", "k8s.io", "images", "import", "--local", "--snapshotter", "native", tarball); err != nil {
			t.Fatalf("importing %s: %v\n%s", im.Ref, err, out)
		}
	}
	return rt
}

func (rt *criRuntime) nriSocket() string { return rt.node.NRISocket() }

func (rt *criRuntime) ctr(args ...string) (string, error) {
	out, err := exec.Command(file("ctr"), append([]string{"--address", rt.node.ContainerdSocket()}, args...)...).CombinedOutput()
	return string(out), err
}

// crictl runs crictl against containerd's CRI and returns its trimmed standard output.
func (rt *criRuntime) crictl(t *testing.T, args ...string) string {
	t.Helper()
	endpoint := "unix://" + rt.node.ContainerdSocket()
	cmd := exec.Command(file("crictl"), append([]string{"--runtime-endpoint", endpoint, "--image-endpoint", endpoint,
		"--timeout", "2m"}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("crictl %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.String())
	}
	return strings.TrimSpace(string(out))
}

// runPod starts a pod named name with labels, in the workload namespace and a BestEffort
// pod cgroup under the hostlab's kubelet root, as crictl runp, create and start do for a
// kubelet, with one container "main" running `workload first-node`. It returns the node
// that container's first report names, and the memory policy its second names. The pod is
// stopped and removed at cleanup.
func (rt *criRuntime) runPod(t *testing.T, lab *hostlab.Lab, name string, labels map[string]string) (node, policy string) {
	t.Helper()
	start := time.Now()
	pod := rt.startPod(t, lab, name, labels)
	_, logPath := pod.startContainer(t, map[string]any{"image": map[string]any{"image": localnode.WorkloadImage}, "args": []string{"first-node"}}, "main")
	var lines []string
	poll(t, apiWait, "the first two lines of "+logPath, func() error {
		var err error
		lines, err = firstLogLines(logPath, 2)
		return err
	})
	t.Logf("pod %s (%s): runp, create, start and the first lines in %s: %q", name, labels, time.Since(start).Round(time.Millisecond), lines)
	node, ok := strings.CutPrefix(lines[0], "first-node ")
	if !ok {
		t.Fatalf("pod %s: its container's first line is %q, want first-node N", name, lines[0])
	}
	policy, ok = strings.CutPrefix(lines[1], "first-policy ")
	if !ok {
		t.Fatalf("pod %s: its container's second line is %q, want first-policy P", name, lines[1])
	}
	return node, policy
}

// criPod is a pod sandbox started through CRI (startPod).
type criPod struct {
	rt      *criRuntime
	id      string
	dir     string // its log directory, where its config files go too
	podFile string
}

// startPod starts a pod sandbox named name with labels, in the workload namespace and a
// BestEffort pod cgroup under the hostlab's kubelet root, on the host's network (the VM
// has no CNI), as crictl runp does for a kubelet. It is stopped and removed at cleanup.
func (rt *criRuntime) startPod(t *testing.T, lab *hostlab.Lab, name string, labels map[string]string) *criPod {
	t.Helper()
	uid := string(uuid.NewUUID())
	dir := filepath.Join(rt.node.Dir, "pods", name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	const hostNetwork = 2 // runtime.v1 NamespaceMode_NODE
	p := &criPod{rt: rt, dir: dir, podFile: filepath.Join(dir, "pod.json")}
	writeJSON(t, p.podFile, map[string]any{
		"metadata":      map[string]any{"name": name, "namespace": workloadNS, "uid": uid},
		"labels":        labels,
		"log_directory": dir,
		"dns_config":    map[string]any{"servers": []string{"10.0.2.3"}},
		"linux": map[string]any{
			"cgroup_parent":    lab.KubeletCgroupRoot() + "/kubepods/besteffort/pod" + uid,
			"security_context": map[string]any{"namespace_options": map[string]any{"network": hostNetwork}},
		},
	})
	p.id = rt.crictl(t, "runp", p.podFile)
	t.Cleanup(func() {
		rt.crictl(t, "stopp", p.id)
		rt.crictl(t, "rmp", p.id)
	})
	return p
}

// startContainer creates and starts, in pod p, a container named name of config ctr (the
// CRI's ContainerConfig as JSON, less its metadata and log path), and returns its ID and
// the path of its log.
func (p *criPod) startContainer(t *testing.T, ctr map[string]any, name string) (id, logPath string) {
	t.Helper()
	ctr["metadata"] = map[string]any{"name": name}
	ctr["log_path"] = name + ".log"
	ctrFile := filepath.Join(p.dir, name+".json")
	writeJSON(t, ctrFile, ctr)
	id = p.rt.crictl(t, "create", p.id, ctrFile, p.podFile)
	p.rt.crictl(t, "start", id)
	return id, filepath.Join(p.dir, name+".log")
}

func writeJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// firstLogLines reads the first n lines of a CRI container log ("<time> <stream> <tag>
// <message>"), each of which must be on stdout and complete (tag F).
func firstLogLines(path string, n int) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	var out []string
	for len(out) < n && sc.Scan() {
		fields := strings.SplitN(sc.Text(), " ", 4)
		if len(fields) != 4 || fields[1] != "stdout" || fields[2] != "F" {
			return nil, fmt.Errorf("%s: the line %q is no complete stdout line", path, sc.Text())
		}
		out = append(out, fields[3])
	}
	if len(out) < n {
		return nil, fmt.Errorf("%s has %d of %d lines: %v", path, len(out), n, sc.Err())
	}
	return out, nil
}
