// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build linux

// Command forkcost measures what forks that concern no selected task cost the node agent,
// on this host (root: real cgroups and the proc connector).
//
//	go build -o /tmp/numapref ./cmd/numapref
//	nice -n 5 go run ./test/forkcost -agent /tmp/numapref [-kernel auto|emulated] [-rates 1000,5000] [-storm 15s]
//	nice -n 5 go run ./test/forkcost -agent /tmp/numapref -rates '' -rescan 2s -idle 60s [-keep]
//
// It makes a lab container with a workload (hostlab; -containers N: N of them), persists a
// desired state that selects them, and starts the agent binary as its own process without an API server (an
// unreachable kubeconfig: the engine enforces the persisted state, the proc connector's
// fork events on). It then reads the agent's CPU time (utime+stime of /proc/<pid>/stat)
// over a quiet window and over a fork storm at each rate. The storm is another process
// (this binary re-executed) whose tasks are in no container: it forks children that exit
// at once (fork and exit events), or with -exec that exec /bin/true (fork, exec and exit,
// as a shell loop). The agent's CPU per unrelated fork is the storm's CPU less the quiet
// rate over the same time, divided by the forks made.
//
// With -kernel emulated and -samples N, a second storm at each rate runs while the
// selected workload forks N times (a raw fork(): the kernel resets the child's preference):
// fork→applied is the time from the fork until the emulator shows the child placed, read
// from the workload's side (polled every 100 µs). Those storms' CPU is not counted.
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/numapref/numapref/internal/testutil/hostlab"
	"github.com/numapref/numapref/internal/testutil/testenv"
)

type options struct {
	agent      string
	kernel     string
	rates      []int
	quiet      time.Duration
	storm      time.Duration
	exec       bool
	samples    int
	keep       bool
	rescan     time.Duration
	idle       time.Duration
	threads    int
	profile    string
	server     bool // the forking server instead (server.go)
	containers int
	rounds     int
	clients    int
}

func main() {
	hostlab.RunWorkloadIfAsked() // a lab workload, or a storm's forker
	var o options
	var rates string
	flag.StringVar(&o.agent, "agent", "", "the agent binary (go build -o /tmp/numapref ./cmd/numapref)")
	flag.StringVar(&o.kernel, "kernel", "auto", "the agent's -kernel: auto (no emulator on a host without the patch) or emulated")
	flag.StringVar(&rates, "rates", "1000,5000", "fork rates of the storms, per second")
	flag.DurationVar(&o.quiet, "quiet", 10*time.Second, "the quiet window")
	flag.DurationVar(&o.storm, "storm", 15*time.Second, "how long each storm lasts")
	flag.BoolVar(&o.exec, "exec", false, "the storm's children exec /bin/true before they exit")
	flag.IntVar(&o.samples, "samples", 0, "with -kernel emulated: selected forks timed in a second storm per rate")
	flag.DurationVar(&o.rescan, "rescan", 10*time.Second, "the agent's -rescan-interval")
	flag.DurationVar(&o.idle, "idle", 0, "also measure the idle cost over this window (the kernel lab's idlecost line); 0 skips it")
	flag.IntVar(&o.containers, "containers", 1, "selected lab containers (pods of one container), each with a workload")
	flag.IntVar(&o.threads, "threads", 1, "extra threads of the selected workload")
	flag.StringVar(&o.profile, "profile", "", "the agent's -profile: a CPU profile to <path>.cpu and allocations to <path>.allocs, written when the agent is stopped (SIGTERM) at the end")
	flag.BoolVar(&o.server, "server", false, "measure a forking server instead: PostgreSQL in a lab container, pgbench -C for -storm per run, without and with the agent")
	flag.IntVar(&o.rounds, "rounds", 3, "with -server: rounds of a run without and a run with the agent")
	flag.IntVar(&o.clients, "clients", 4, "with -server: pgbench's clients")
	flag.BoolVar(&o.keep, "keep", false, "leave the agent running after the figures, until interrupted (for a profiler)")
	flag.Parse()
	for _, r := range strings.FieldsFunc(rates, func(c rune) bool { return c == ',' }) {
		n, err := strconv.Atoi(strings.TrimSpace(r))
		if err != nil || n <= 0 {
			fmt.Fprintf(os.Stderr, "forkcost: bad rate %q\n", r)
			os.Exit(2)
		}
		o.rates = append(o.rates, n)
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "forkcost:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	if o.agent == "" {
		return errors.New("-agent is required")
	}
	if o.server {
		return measureServer(o)
	}
	if o.samples > 0 && o.kernel != "emulated" {
		return errors.New("-samples needs -kernel emulated (only the emulator shows a child placed)")
	}
	s, err := setUp(o)
	if err != nil {
		return err
	}
	defer s.close()
	fmt.Printf("agent pid %d, -kernel %s, storm children %s\n", s.agent.Process.Pid, o.kernel, map[bool]string{false: "fork+exit", true: "fork+exec+exit"}[o.exec])
	quiet, err := sample(s.agent.Process.Pid, func() error { time.Sleep(o.quiet); return nil })
	if err != nil {
		return err
	}
	fmt.Printf("quiet: %.1f ms of agent CPU per second, %.0f forks/s on the host\n", quiet.cpuRate()/1e6, quiet.forkRate())
	if o.idle > 0 {
		if err := s.measureIdle(o); err != nil {
			return err
		}
		if err := s.printMemory(); err != nil {
			return err
		}
	}
	for _, rate := range o.rates {
		if err := s.measureCPU(o, rate, quiet); err != nil {
			return err
		}
		if o.samples > 0 {
			if err := s.measureLag(o, rate); err != nil {
				return err
			}
		}
	}
	if o.keep {
		fmt.Println("agent left running; interrupt to end")
		stop := make(chan os.Signal, 1)
		signal.Notify(stop, os.Interrupt, syscall.SIGTERM)
		<-stop
	}
	return nil
}

// window is the agent's CPU time and the host's forks over a stretch of time.
type window struct {
	cpu     int64 // ns
	forks   int64 // every clone of the host, the storm's and the background's
	elapsed time.Duration
}

func (w window) cpuRate() float64  { return float64(w.cpu) / w.elapsed.Seconds() }
func (w window) forkRate() float64 { return float64(w.forks) / w.elapsed.Seconds() }

// sample reads the CPU time of process pid (the agent) and the host's fork count around f.
func sample(pid int, f func() error) (window, error) {
	cpu0, err1 := hostlab.ProcessCPU(pid)
	forks0, err2 := hostForks()
	began := time.Now()
	if err := errors.Join(err1, err2); err != nil {
		return window{}, err
	}
	if err := f(); err != nil {
		return window{}, err
	}
	cpu1, err1 := hostlab.ProcessCPU(pid)
	forks1, err2 := hostForks()
	return window{cpu: int64(cpu1 - cpu0), forks: forks1 - forks0, elapsed: time.Since(began)}, errors.Join(err1, err2)
}

// hostForks reads the number of forks since boot (the "processes" line of /proc/stat).
func hostForks() (int64, error) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, fmt.Errorf("reading the host's forks: %w", err)
	}
	for line := range strings.Lines(string(data)) {
		if v, ok := strings.CutPrefix(line, "processes "); ok {
			return strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		}
	}
	return 0, errors.New("no processes line in /proc/stat")
}

// measureCPU runs one storm and prints the agent's CPU per fork: the storm window's CPU
// less the quiet rate over as long, per fork of the storm; and, as a check against the
// background's forks (other work on a shared host forks too), the extra CPU per extra
// fork of the whole host.
func (s *setup) measureCPU(o options, rate int, quiet window) error {
	var forks int
	w, err := sample(s.agent.Process.Pid, func() error {
		var err error
		forks, err = storm(rate, o.storm, o.exec, nil)
		// The agent may still hold a backlog: let it drain before the reading.
		time.Sleep(time.Second)
		return err
	})
	if err != nil {
		return err
	}
	extra := float64(w.cpu) - quiet.cpuRate()*w.elapsed.Seconds()
	hostExtra := float64(w.forks) - quiet.forkRate()*w.elapsed.Seconds()
	fmt.Printf("storm %d/s for %v: %d forks (%.0f/s achieved); agent CPU %.1f ms/s over %.1fs; "+
		"%.1f µs per unrelated fork (%.1f µs per extra host fork)\n",
		rate, o.storm, forks, float64(forks)/o.storm.Seconds(), w.cpuRate()/1e6, w.elapsed.Seconds(),
		extra/float64(forks)/1e3, extra/hostExtra/1e3)
	return nil
}

// measureLag runs one storm during which the selected workload forks o.samples times, and
// prints fork→applied as the workload sees it.
func (s *setup) measureLag(o options, rate int) error {
	lags := make(chan []time.Duration, 1)
	errc := make(chan error, 1)
	during := func() {
		l, err := s.selectedForks(o.samples, o.storm)
		lags <- l
		errc <- err
	}
	if _, err := storm(rate, o.storm, o.exec, during); err != nil {
		return err
	}
	l, err := <-lags, <-errc
	if err != nil {
		return err
	}
	slices.Sort(l)
	fmt.Printf("storm %d/s: fork→applied of %d selected forks: p50 %v, p99 %v, max %v\n",
		rate, len(l), quantile(l, 0.50), quantile(l, 0.99), l[len(l)-1])
	return nil
}

func quantile(sorted []time.Duration, q float64) time.Duration {
	i := int(q*float64(len(sorted)) + 0.5)
	return sorted[min(max(i-1, 0), len(sorted)-1)].Round(10 * time.Microsecond)
}

// freePort returns a local address nothing listens on now.
func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func healthy(addr string) bool {
	resp, err := http.Get("http://" + addr + "/healthz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// waitFor polls cond every 50 ms until it holds or timeout passes.
func waitFor(timeout time.Duration, what string, cond func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("waiting for %s: %w", what, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// logTail returns the last lines of the agent's log, for an error.
func logTail(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	return strings.Join(lines[max(len(lines)-20, 0):], "\n")
}

// startAgent starts the agent binary without an API server, its log in dir/agent.log.
func startAgent(o options, dir string, args ...string) (*exec.Cmd, error) {
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(testenv.UnreachableKubeconfig), 0o600); err != nil {
		return nil, err
	}
	health, err := freePort()
	if err != nil {
		return nil, err
	}
	logPath := filepath.Join(dir, "agent.log")
	out, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer out.Close()
	cmd := exec.Command(o.agent, append([]string{"agent", "-node-name", "forkcost", "-kubeconfig", kubeconfig,
		"-kernel", o.kernel, "-cgroup-driver", "cgroupfs", "-metrics-bind-address", "0",
		"-health-probe-bind-address", health, "-leader-elect=false"}, args...)...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := hostlab.StartOnSpawnerThread(cmd); err != nil {
		return nil, fmt.Errorf("starting the agent: %w", err)
	}
	return cmd, waitFor(60*time.Second, "the agent's health probe", func() error {
		if !healthy(health) {
			return fmt.Errorf("not healthy; log:\n%s", logTail(logPath))
		}
		return nil
	})
}
