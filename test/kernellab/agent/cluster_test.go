// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build linux && kernellab

package agent

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/internal/inspect"
	"github.com/numapref/numapref/internal/numa/mempolicy"
	"github.com/numapref/numapref/internal/testutil/builders"
	"github.com/numapref/numapref/internal/testutil/hostlab"
	testpoll "github.com/numapref/numapref/internal/testutil/poll"
	"github.com/numapref/numapref/internal/testutil/testcerts"
)

// What hack/kernel/lab.sh puts in the initramfs (run.sh --file): the agent binary, kubectl,
// and kubeconfigs that test/kernellab/apihost wrote for the apiserver on the host, which
// the VM reaches at the guestfwd address 10.0.2.100:6443 and nowhere else.
const (
	filesDir        = "/kernellab/files"
	agentNamespace  = "numapref-system"
	workloadNS      = "lab"
	metricsAddr     = "127.0.0.1:8443"
	healthAddr      = "127.0.0.1:8081"
	rescanInterval  = 2 * time.Second
	apiWait         = 90 * time.Second
	agentBinaryName = "numapref"
	// beforeBinaryName is an earlier commit's agent (hack/kernel/lab.sh --before REV).
	beforeBinaryName = "numapref-before"
)

func file(name string) string { return filepath.Join(filesDir, name) }

// cluster is the lab's view of the apiserver: an admin client and the node it plays.
type cluster struct {
	c        client.Client
	node     string
	kubecfg  string // admin kubeconfig, for kubectl
	token    string // a token for the agent's audience, for /metrics and /inspect
	tmp      string
	reportTo string
	// http talks to the agent's metrics port; kept, so the per-second scrapes of the
	// effect experiment reuse one TLS connection.
	http *http.Client
}

func newCluster(t *testing.T, kernel string) *cluster {
	t.Helper()
	kubecfg := file("admin.kubeconfig")
	cfg, err := clientcmd.BuildConfigFromFlags("", kubecfg)
	if err != nil {
		t.Fatalf("loading %s (lab.sh provides it; run the lab with make kernel-lab): %v", kubecfg, err)
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := numav1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	cl := &cluster{c: c, node: "kernellab-" + kernel, kubecfg: kubecfg, tmp: t.TempDir(),
		reportTo: os.Getenv("KERNELLAB_REPORT_DIR")}
	ctx := context.Background()
	start := time.Now()
	poll(t, apiWait, "the apiserver through the guestfwd", func() error {
		var ns corev1.Namespace
		return c.Get(ctx, client.ObjectKey{Name: "default"}, &ns)
	})
	t.Logf("apiserver reached through the guestfwd in %s", time.Since(start).Round(time.Millisecond))
	inspector := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "lab-inspector", Namespace: workloadNS}}
	for _, obj := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: workloadNS}},
		// No controller manager runs: the pods' ServiceAccount is made by hand.
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: workloadNS}},
		inspector,
		// What scrapes /metrics and calls /inspect here: the reader roles and get on pods.
		&rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "lab-inspector"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: inspector.Name, Namespace: workloadNS}},
		},
	} {
		if err := c.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	// The agent's endpoints take tokens bound to its audience (inspect only those): ask
	// the API for one, as kubectl numapref does.
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		Audiences: []string{inspect.Audience}, ExpirationSeconds: ptr(int64(7200))}}
	if err := c.SubResource("token").Create(ctx, inspector, tr); err != nil {
		t.Fatalf("requesting a %s token: %v", inspect.Audience, err)
	}
	cl.token = tr.Status.Token
	return cl
}

// serveTLS makes a CA and a serving certificate for 127.0.0.1 in a kubernetes.io/tls
// Secret's layout, for the agent's -tls-cert-dir, and a client that verifies the agent
// with that CA. It returns the directory.
func (cl *cluster) serveTLS(t *testing.T) string {
	t.Helper()
	ca := testcerts.NewCA(t, "kernellab-agent-ca")
	dir := filepath.Join(cl.tmp, "tls")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	testcerts.WriteSecretDir(t, dir, ca.Issue(t, []string{"localhost"}, []net.IP{net.ParseIP("127.0.0.1")}))
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.PEM)
	cl.http = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	return dir
}

// labPod is a Pod object whose status names a kubepods-shaped cgroup of the hostlab,
// with a real workload in it, as kubelet would have made them.
type labPod struct {
	pod       *corev1.Pod
	container *hostlab.Container
	workload  *hostlab.Workload
}

// createPod makes a BestEffort pod with one container "main" on the cluster's node, then
// its cgroup (named after the UID the apiserver gave it), a workload with threads extra
// threads in it, and the pod's status (Running, the container's ID).
func (cl *cluster) createPod(t *testing.T, lab *hostlab.Lab, name string, labels map[string]string, threads int, memory bool) *labPod {
	t.Helper()
	return cl.createPodWithPolicy(t, lab, name, labels, threads, memory, nil)
}

// createPodWithPolicy is createPod with the workload created holding memory policy p (nil:
// none), as a runtime gives linux.memoryPolicy at creation.
func (cl *cluster) createPodWithPolicy(t *testing.T, lab *hostlab.Lab, name string, labels map[string]string, threads int, memory bool, p *mempolicy.Policy) *labPod {
	t.Helper()
	ctx := context.Background()
	pod := builders.MakePod(workloadNS, name).Node(cl.node).Labels(labels).NoServiceAccountToken().
		Containers("main").Image("numapref.local/workload:kernellab").Obj()
	if err := cl.c.Create(ctx, pod); err != nil {
		t.Fatalf("creating pod %s: %v", name, err)
	}
	t.Cleanup(func() {
		if err := cl.c.Delete(context.Background(), pod, client.GracePeriodSeconds(0)); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting pod %s: %v", name, err)
		}
	})
	id := fmt.Sprintf("%064x", time.Now().UnixNano())
	c, err := lab.Container(corev1.PodQOSBestEffort, string(pod.UID), id)
	if err != nil {
		t.Fatal(err)
	}
	if memory {
		if err := c.EnableMemory(); err != nil {
			t.Fatal(err)
		}
	}
	w, err := c.StartWorkloadWithPolicy(threads, p)
	if err != nil {
		t.Fatal(err)
	}
	now := metav1.Now()
	pod.Status = corev1.PodStatus{
		Phase:    corev1.PodRunning,
		QOSClass: corev1.PodQOSBestEffort,
		Conditions: []corev1.PodCondition{
			{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
		},
		ContainerStatuses: []corev1.ContainerStatus{{
			Name: "main", Image: "numapref.local/workload:kernellab", ImageID: "numapref.local/workload@sha256:" + id,
			ContainerID: c.ContainerID, Ready: true, Started: ptr(true),
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
		}},
	}
	if err := cl.c.Status().Update(ctx, pod); err != nil {
		t.Fatalf("writing the status of pod %s: %v", name, err)
	}
	return &labPod{pod: pod, container: c, workload: w}
}

// kubectl runs the kubectl binary of the initramfs as the admin.
func (cl *cluster) kubectl(t *testing.T, stdin string, args ...string) string { //nolint:unparam // a command runner returns its output; today's callers only apply and delete
	t.Helper()
	cmd := exec.Command(file("kubectl"), append([]string{"--kubeconfig", cl.kubecfg}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	t.Logf("kubectl %s: %s", strings.Join(args, " "), strings.TrimSpace(string(out)))
	return string(out)
}

// applyPreference `kubectl apply`s a NumaPreference of mode Static for node, with the
// further spec fields spec ("pageMigration: Once").
func (cl *cluster) applyPreference(t *testing.T, name string, selector map[string]string, node int, spec ...string) { //nolint:unparam // the VM has nodes 0 and 1; the tests prefer 1, which no task that nothing placed reports
	t.Helper()
	var labels []string
	for k, v := range selector {
		labels = append(labels, fmt.Sprintf("%s: %s", k, v))
	}
	manifest := fmt.Sprintf(`apiVersion: numa.numapref.io/v1alpha1
kind: NumaPreference
metadata: {name: %s, namespace: %s}
spec:
  selector: {matchLabels: {%s}}
  node: %d
`, name, workloadNS, strings.Join(labels, ", "), node)
	for _, field := range spec {
		manifest += "  " + field + "\n"
	}
	path := filepath.Join(cl.tmp, name+".yaml")
	if err := os.WriteFile(path, []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	cl.kubectl(t, "", "apply", "-f", path)
}

func (cl *cluster) deletePreference(t *testing.T, name string) {
	t.Helper()
	cl.kubectl(t, "", "delete", "-n", workloadNS, "numapreference", name, "--wait=true")
}

// report reads the node's NumaNodeReport entry for preference name.
func (cl *cluster) reportEntry(name string) (numav1.NumaNodeReport, *numav1.PreferenceReport, error) {
	var rep numav1.NumaNodeReport
	if err := cl.c.Get(context.Background(), client.ObjectKey{Name: cl.node}, &rep); err != nil {
		return rep, nil, err
	}
	for i := range rep.Status.Preferences {
		e := &rep.Status.Preferences[i]
		if e.Namespace == workloadNS && e.Name == name {
			return rep, e, nil
		}
	}
	return rep, nil, nil
}

// condition returns the preference's condition of type typ, or an error saying what is there.
func (cl *cluster) condition(name, typ string) (metav1.Condition, error) {
	var p numav1.NumaPreference
	if err := cl.c.Get(context.Background(), client.ObjectKey{Namespace: workloadNS, Name: name}, &p); err != nil {
		return metav1.Condition{}, err
	}
	for _, c := range p.Status.Conditions {
		if c.Type == typ {
			if c.ObservedGeneration != p.Generation {
				return c, fmt.Errorf("%s observed generation %d, want %d", typ, c.ObservedGeneration, p.Generation)
			}
			return c, nil
		}
	}
	return metav1.Condition{}, fmt.Errorf("no %s condition yet (conditions: %+v)", typ, p.Status.Conditions)
}

// podEvent finds an events.k8s.io Event about pod with reason.
func (cl *cluster) podEvent(pod *corev1.Pod, reason string) (*eventsv1.Event, error) { //nolint:unparam // the Event is for a caller that checks its text; today's check only that it exists
	var list eventsv1.EventList
	if err := cl.c.List(context.Background(), &list, client.InNamespace(pod.Namespace)); err != nil {
		return nil, err
	}
	var seen []string
	for i := range list.Items {
		e := &list.Items[i]
		if e.Regarding.UID != pod.UID {
			continue
		}
		if e.Reason == reason {
			return e, nil
		}
		seen = append(seen, e.Reason)
	}
	return nil, fmt.Errorf("no %s Event on pod %s (its Events: %v)", reason, pod.Name, seen)
}

// agent is the numapref agent binary running in the VM, as the DaemonSet would run it.
type agent struct {
	cmd     *exec.Cmd
	log     string
	started time.Time
}

// startAgent starts `numapref agent --kernel=auto` for the cluster's node, with the
// agent's own pod-bound token, on the hostlab's cgroup root, and waits until it is ready.
func (cl *cluster) startAgent(t *testing.T, lab *hostlab.Lab, extra ...string) *agent {
	t.Helper()
	return cl.startAgentBinary(t, lab, agentBinaryName, "state", extra...)
}

// startAgentBinary is startAgent with the initramfs's binary named binary, keeping its
// state in the directory named stateDir.
func (cl *cluster) startAgentBinary(t *testing.T, lab *hostlab.Lab, binary, stateDir string, extra ...string) *agent {
	t.Helper()
	logDir := cl.reportTo
	if logDir == "" {
		logDir = cl.tmp
	}
	// A subtest's name has slashes: one file per (sub)test, in logDir itself.
	logPath := filepath.Join(logDir, "agent-"+strings.ReplaceAll(t.Name(), "/", "_")+".log")
	log, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	args := append([]string{"agent",
		"--kernel=auto",
		"--node-name=" + cl.node,
		"--kubeconfig=" + file("agent-"+cl.node+".kubeconfig"),
		"--host-root=/",
		"--cgroup-driver=cgroupfs",
		"--kubelet-cgroup-root=" + lab.KubeletCgroupRoot(),
		"--state-dir=" + filepath.Join(cl.tmp, stateDir),
		"--rescan-interval=" + rescanInterval.String(),
		"--report-interval=1s",
		"--metrics-bind-address=" + metricsAddr,
		"--health-probe-bind-address=" + healthAddr,
		"--tls-cert-dir=" + cl.serveTLS(t),
	}, extra...)
	cmd := exec.Command(file(binary), args...)
	cmd.Stdout, cmd.Stderr = log, log
	a := &agent{cmd: cmd, log: logPath, started: time.Now()}
	startDaemon(t, "the agent", cmd, logPath, func() error {
		resp, err := http.Get("http://" + healthAddr + "/readyz")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("readyz: %s", resp.Status)
		}
		return nil
	})
	t.Logf("agent pid %d ready after %s (log %s)", cmd.Process.Pid, time.Since(a.started).Round(time.Millisecond), logPath)
	return a
}

func (a *agent) pid() int { return a.cmd.Process.Pid }

// startDaemon starts cmd, a daemon whose output goes to the file logPath, from the spawner
// thread with SIGKILL as its parent-death signal, stops it at cleanup (stopProcess), and
// polls ready until it succeeds, failing at once when the daemon exits.
func startDaemon(t *testing.T, what string, cmd *exec.Cmd, logPath string, ready func() error) {
	t.Helper()
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := hostlab.StartOnSpawnerThread(cmd); err != nil {
		t.Fatalf("starting %s: %v", what, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { stopProcess(t, what, cmd, exited) })
	poll(t, apiWait, what+" ready", func() error {
		select {
		case err := <-exited:
			exited <- err
			return fmt.Errorf("%s exited: %v (log %s:\n%s)", what, err, logPath, tail(logPath, 30))
		default:
		}
		return ready()
	})
}

// stopProcess sends SIGTERM to a process the test started, whose Wait's result comes on
// exited, and waits up to 20 s, then sends SIGKILL.
func stopProcess(t *testing.T, what string, cmd *exec.Cmd, exited chan error) {
	if cmd.ProcessState != nil {
		return
	}
	cmd.Process.Signal(syscall.SIGTERM)
	var err error
	select {
	case err = <-exited:
	case <-time.After(20 * time.Second):
		t.Errorf("%s did not stop within 20 s of SIGTERM; killing it", what)
		cmd.Process.Kill()
		err = <-exited
	}
	if err != nil {
		t.Logf("%s exited: %v", what, err)
	}
}

// get fetches an agent endpoint on the metrics port with the inspector's token, verifying
// the agent's certificate (serveTLS).
func (cl *cluster) get(path string) (int, []byte, error) {
	req, err := http.NewRequest(http.MethodGet, "https://"+metricsAddr+path, nil)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+cl.token)
	resp, err := cl.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, body, err
}

// metrics scrapes /metrics and parses it.
func (cl *cluster) metrics() (map[string]*dto.MetricFamily, error) {
	code, body, err := cl.get("/metrics")
	if err != nil {
		return nil, err
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("/metrics: HTTP %d: %s", code, body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	return p.TextToMetricFamilies(strings.NewReader(string(body)))
}

// series returns the value of the first series of family whose labels include want.
func series(mfs map[string]*dto.MetricFamily, family string, want map[string]string) (float64, bool) {
	mf, ok := mfs[family]
	if !ok {
		return 0, false
	}
next:
	for _, m := range mf.GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if have[k] != v {
				continue next
			}
		}
		switch {
		case m.Gauge != nil:
			return m.GetGauge().GetValue(), true
		case m.Counter != nil:
			return m.GetCounter().GetValue(), true
		}
	}
	return 0, false
}

// cpuSeconds is the CPU time of process pid (all its threads), in seconds.
func cpuSeconds(pid int) (float64, error) {
	d, err := hostlab.ProcessCPU(pid)
	return d.Seconds(), err
}

// poll calls f until it succeeds or timeout passes, then fails t with f's last error.
func poll(t *testing.T, timeout time.Duration, what string, f func() error) {
	t.Helper()
	testpoll.NoError(t, timeout, what, f)
}

func tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}

func writeJSONLine(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

func ptr[T any](v T) *T { return &v }
