// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build linux && kernellab

package agent

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/numapref/numapref/internal/numa/prctl"
	"github.com/numapref/numapref/internal/testutil/hostlab"
	"github.com/numapref/numapref/test/kernellab/labenv"
)

// The forking server's image (hack/kernel/server-image.sh: Debian's PostgreSQL 15, a
// cluster with pgbench's tables at scale 1), which hack/kernel/lab.sh --server puts in the
// initramfs.
const (
	serverImageFile = "server-image.tar"
	serverImage     = "numapref.local/postgres:15"
)

// How pgbench drives the server: a new connection per transaction (-C), so a backend
// forked per transaction, select-only, for serverRun each time.
var (
	serverRun     = envDuration("KERNELLAB_SERVER_RUN", 30*time.Second)
	serverClients = 2
	// The placed share counts backends at least this old: the agent's fork->applied under
	// TCG is tens of ms.
	serverPlacedAge = 100 * time.Millisecond
)

// TestForkingServer runs PostgreSQL 15 in a CRI pod on the patched kernel, and pgbench -C
// -S against it from a second pod, for the same time twice in one boot: without the agent
// (no NRI plugin registered), then with the agent as containerd's NRI plugin, a
// NumaPreference selecting the server's pod. Every connection is a fork of the
// postmaster, whose child the kernel starts with no preference, so only the agent's fork
// pass places it. It prints a forkserver line: the transactions of each run, the agent's
// CPU per backend, and the share of backends placed. The figures are the lab's (qemu TCG);
// the test fails only when the agent does not place the server or none of its backends.
func TestForkingServer(t *testing.T) {
	labenv.RequireKernel(t, "patched")
	if _, err := os.Stat(file(serverImageFile)); err != nil {
		t.Fatalf("the forking server's image is not in the initramfs (hack/kernel/lab.sh --server puts it there): %v", err)
	}
	backend := mustPrctl(t)
	cl := newCluster(t, "patched")
	lab := newHostlab(t)
	rt := startRuntime(t, cl)
	rt.importImage(t, file(serverImageFile))
	cl.applyPreference(t, "pg-server", map[string]string{"app": "pg-server"}, criNode)
	t.Cleanup(func() { cl.deletePreference(t, "pg-server") })

	srv := rt.startPod(t, lab, "pg-server", map[string]string{"app": "pg-server"})
	ctrID, logPath := srv.startContainer(t, map[string]any{"image": map[string]any{"image": serverImage}}, "postgres")
	postmaster := rt.containerPid(t, ctrID)
	client := rt.startPod(t, lab, "pg-client", map[string]string{"app": "pg-client"})
	poll(t, apiWait, "postgres ready ("+logPath+")", func() error {
		b, err := os.ReadFile(logPath)
		if err != nil {
			return err
		}
		if !strings.Contains(string(b), "ready to accept connections") {
			return fmt.Errorf("not ready yet")
		}
		return nil
	})
	runs := 0
	bench := func(d time.Duration) pgbenchResult {
		runs++
		return client.pgbench(t, fmt.Sprintf("bench-%d", runs), d)
	}
	procs := cgroupProcs(t, postmaster)
	own := pidSet(t, procs) // the server's own processes (no backend), placed with it
	// Both runs are sampled alike, so that the sampler's CPU costs each the same.
	sampled := func(d time.Duration) (pgbenchResult, backendSamples) {
		stop, done := make(chan struct{}), make(chan backendSamples)
		go func() { done <- sampleBackends(backend, procs, own, stop) }()
		r := bench(d)
		close(stop)
		return r, <-done
	}
	bench(serverRun / 3) // warm-up: the server's caches, not counted
	without, _ := sampled(serverRun)

	a := cl.startAgent(t, lab, "--nri-socket="+rt.nriSocket(), "--nri-start-grace=1h")
	poll(t, apiWait, "the postmaster placed by the agent's start path (NRI Synchronize)", func() error {
		return placed(backend, postmaster, criNode)
	})
	cpu0, err := cpuSeconds(a.pid())
	if err != nil {
		t.Fatal(err)
	}
	with, s := sampled(serverRun)
	cpu1, err := cpuSeconds(a.pid())
	if err != nil {
		t.Fatal(err)
	}

	fewer := 100 * (without.tps - with.tps) / without.tps
	perBackend := (cpu1 - cpu0) / float64(max(with.transactions, 1)) * 1e6
	fmt.Printf("forkserver clients=%d run_s=%.0f tps_without=%.1f tps_with=%.1f fewer_pct=%.1f backends_with=%d agent_cpu_s=%.2f agent_cpu_per_backend_us=%.0f placed_samples=%d/%d placed_backends=%d/%d\n",
		serverClients, serverRun.Seconds(), without.tps, with.tps, fewer, with.transactions, cpu1-cpu0, perBackend,
		s.placedSamples, s.samples, len(s.placed), len(s.seen))
	if len(s.placed) == 0 {
		t.Errorf("none of the %d backends seen at least %s old was placed at node %d", len(s.seen), serverPlacedAge, criNode)
	}
}

// importImage imports the image tarball path into containerd's k8s.io namespace, unpacked
// for the native snapshotter (startRuntime), and removes the tarball: the initramfs lives
// in guest RAM.
func (rt *criRuntime) importImage(t *testing.T, path string) {
	t.Helper()
	start := time.Now()
	if out, err := rt.ctr("-n", "k8s.io", "images", "import", "--local", "--snapshotter", "native", path); err != nil {
		t.Fatalf("importing %s: %v\n%s", path, err, out)
	}
	if err := os.Remove(path); err != nil {
		t.Logf("removing %s: %v", path, err)
	}
	t.Logf("imported %s in %s", path, time.Since(start).Round(time.Millisecond))
}

// containerPid is the pid of container id's init, from crictl inspect.
func (rt *criRuntime) containerPid(t *testing.T, id string) int {
	t.Helper()
	var info struct {
		Info struct {
			Pid int `json:"pid"`
		} `json:"info"`
	}
	out := rt.crictl(t, "inspect", "-o", "json", id)
	if err := json.Unmarshal([]byte(out), &info); err != nil || info.Info.Pid <= 0 {
		t.Fatalf("crictl inspect %s: no pid (%v):\n%s", id, err, out)
	}
	return info.Info.Pid
}

// pgbenchResult is what one pgbench run reports.
type pgbenchResult struct {
	tps          float64
	transactions int
}

var (
	pgbenchTPS          = regexp.MustCompile(`(?m)^tps = ([0-9.]+)`)
	pgbenchTransactions = regexp.MustCompile(`(?m)^number of transactions actually processed: ([0-9]+)`)
)

// pgbench runs, as a container named name of pod p, pgbench -C -S with serverClients
// clients for d against the server on 127.0.0.1 (both pods are on the host's network),
// waits for it to exit and reads its figures from its log.
func (p *criPod) pgbench(t *testing.T, name string, d time.Duration) pgbenchResult {
	t.Helper()
	cmd := []string{"pgbench", "-h", "127.0.0.1", "-U", "postgres", "-C", "-S", "-n",
		"-c", strconv.Itoa(serverClients), "-j", strconv.Itoa(serverClients), "-T", strconv.Itoa(int(d.Seconds())), "postgres"}
	id, logPath := p.startContainer(t, map[string]any{"image": map[string]any{"image": serverImage}, "command": cmd}, name)
	poll(t, d+apiWait, "pgbench "+name+" exited", func() error {
		var st struct {
			Status struct {
				State    string `json:"state"`
				ExitCode int    `json:"exitCode"`
			} `json:"status"`
		}
		out := p.rt.crictl(t, "inspect", "-o", "json", id)
		if err := json.Unmarshal([]byte(out), &st); err != nil {
			return err
		}
		if st.Status.State != "CONTAINER_EXITED" {
			return fmt.Errorf("state %s", st.Status.State)
		}
		if st.Status.ExitCode != 0 {
			t.Fatalf("pgbench %s exited %d:\n%s", name, st.Status.ExitCode, tail(logPath, 30))
		}
		return nil
	})
	b := []byte(logMessages(t, logPath))
	tps, n := pgbenchTPS.FindSubmatch(b), pgbenchTransactions.FindSubmatch(b)
	if tps == nil || n == nil {
		t.Fatalf("pgbench %s: no tps or transactions line in its log:\n%s", name, b)
	}
	var r pgbenchResult
	r.tps, _ = strconv.ParseFloat(string(tps[1]), 64)
	r.transactions, _ = strconv.Atoi(string(n[1]))
	t.Logf("pgbench %s: %.1f tps, %d transactions", name, r.tps, r.transactions)
	return r
}

// cgroupProcs is the cgroup.procs file of process pid's cgroup (cgroup v2).
func cgroupProcs(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cgroup"))
	if err != nil {
		t.Fatal(err)
	}
	path, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "0::")
	if !ok {
		t.Fatalf("/proc/%d/cgroup: %q is no cgroup v2 line", pid, b)
	}
	return filepath.Join("/sys/fs/cgroup", path, "cgroup.procs")
}

// pidSet reads the pids of a cgroup.procs file.
func pidSet(t *testing.T, procs string) map[int]bool {
	t.Helper()
	pids, err := readPids(procs)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]bool{}
	for _, pid := range pids {
		out[pid] = true
	}
	return out
}

func readPids(procs string) ([]int, error) {
	b, err := os.ReadFile(procs)
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// backendSamples is what sampleBackends saw: samples of backends at least serverPlacedAge
// old, those of them placed, and the distinct backends seen so and placed.
type backendSamples struct {
	samples, placedSamples int
	seen, placed           map[int]bool
}

// sampleBackends looks at the server container's processes (cgroup.procs file procs)
// every 50 ms until stop, leaving out the server's own (own), and checks each backend at
// least serverPlacedAge old with the real prctl GET and /proc/<pid>/sched; a backend gone
// meanwhile is not counted.
func sampleBackends(backend *prctl.Prctl, procs string, own map[int]bool, stop <-chan struct{}) backendSamples {
	s := backendSamples{seen: map[int]bool{}, placed: map[int]bool{}}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return s
		case <-tick.C:
		}
		pids, _ := readPids(procs)
		for _, pid := range pids {
			if own[pid] {
				continue
			}
			if age, err := hostlab.ProcessAge(pid); err != nil || age < serverPlacedAge {
				continue
			}
			err := placed(backend, pid, criNode)
			if !hostlab.Running(pid) {
				continue
			}
			s.samples++
			s.seen[pid] = true
			if err == nil {
				s.placedSamples++
				s.placed[pid] = true
			}
		}
	}
}

// logMessages is the text of a CRI container log ("<time> <stream> <tag> <message>" lines),
// the messages alone, a line each.
func logMessages(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if f := strings.SplitN(line, " ", 4); len(f) == 4 {
			out.WriteString(f[3] + "\n")
		}
	}
	return out.String()
}

// envDuration is the duration in environment variable name, or def.
func envDuration(name string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(os.Getenv(name)); err == nil && d > 0 {
		return d
	}
	return def
}
