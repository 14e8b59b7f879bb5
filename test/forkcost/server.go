// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package main

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/numapref/numapref/internal/nodeagent/cgroups"
	"github.com/numapref/numapref/internal/nodeagent/desire"
	"github.com/numapref/numapref/internal/testutil/hostlab"
)

// The forking server: PostgreSQL (Debian's, its binaries under pgBin) in a lab container,
// which forks a backend per connection, driven from outside the container by pgbench -C
// (a new connection per transaction, so a fork per transaction), select-only. Rounds
// alternate without and with the agent selecting the container; with -kernel emulated, a
// sampler checks that every backend older than 100 ms holds the preferred node.
//
//	nice -n 5 go run ./test/forkcost -agent /tmp/numapref -server -kernel emulated [-rounds 3] [-storm 15s] [-clients 4]
const (
	pgBin       = "/usr/lib/postgresql/15/bin"
	serverPodID = "25252525-2222-3333-4444-555555555555"
)

// server is the database in its lab container.
type server struct {
	lab       *hostlab.Lab
	container *hostlab.Container
	dir       string // data, socket and logs; owned by the postgres user
	uid, gid  uint32
	postgres  *exec.Cmd
}

func measureServer(o options) error {
	lab, err := hostlab.New("/sys/fs/cgroup")
	if err != nil {
		return err
	}
	srv := &server{lab: lab}
	defer srv.close()
	if err := srv.start(); err != nil {
		return err
	}
	if out, err := srv.pgbench("-i", "-s", "1", "-q"); err != nil {
		return fmt.Errorf("pgbench -i: %w\n%s", err, out)
	}
	var without, with []float64
	var sampled, nPlaced int
	for round := range o.rounds {
		tps, err := srv.bench(o)
		if err != nil {
			return err
		}
		without = append(without, tps)
		tps, s, p, err := srv.benchWithAgent(o)
		if err != nil {
			return err
		}
		with = append(with, tps)
		sampled, nPlaced = sampled+s, nPlaced+p
		fmt.Printf("round %d: %.0f tps without the agent, %.0f with\n", round+1, without[round], tps)
	}
	w, a := mean(without), mean(with)
	fmt.Printf("forking server (pgbench -C -S, %d clients, %v per run, %d rounds): %.0f tps without the agent, %.0f with: %.1f%% fewer",
		o.clients, o.storm, o.rounds, w, a, 100*(w-a)/w)
	if o.kernel == "emulated" {
		fmt.Printf("; backends older than 100 ms placed: %d of %d samples", nPlaced, sampled)
	}
	fmt.Println()
	return nil
}

func mean(v []float64) float64 {
	var s float64
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

// start makes the container, initialises a database cluster and starts the postmaster in
// the container: a shell that waits on its stdin until it is attached, then execs postgres.
func (s *server) start() error {
	c, err := s.lab.Container(corev1.PodQOSGuaranteed, serverPodID, strings.Repeat("25", 32))
	if err != nil {
		return err
	}
	s.container = c
	u, err := user.Lookup("postgres")
	if err != nil {
		return fmt.Errorf("the forking server needs Debian's postgresql (its postgres user): %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	s.uid, s.gid = uint32(uid), uint32(gid)
	if s.dir, err = os.MkdirTemp("", "forkcost-pg-"); err != nil {
		return err
	}
	if err := os.Chown(s.dir, uid, gid); err != nil {
		return err
	}
	if out, err := s.asPostgres(filepath.Join(pgBin, "initdb"), "-D", s.data(), "-A", "trust", "-U", "postgres", "--no-sync").CombinedOutput(); err != nil {
		return fmt.Errorf("initdb: %w\n%s", err, out)
	}
	s.postgres = s.asPostgres("/bin/sh", "-c", `read go && exec "$0" "$@"`, filepath.Join(pgBin, "postgres"), "-D", s.data(),
		"-k", s.dir, "-c", "listen_addresses=", "-c", "fsync=off", "-c", "max_connections=64", "-c", "shared_buffers=32MB")
	log, err := os.Create(filepath.Join(s.dir, "postgres.log"))
	if err != nil {
		return err
	}
	defer log.Close()
	s.postgres.Stdout, s.postgres.Stderr = log, log
	stdin, err := s.postgres.StdinPipe()
	if err != nil {
		return err
	}
	s.postgres.SysProcAttr.Pdeathsig = syscall.SIGKILL
	if err := hostlab.StartOnSpawnerThread(s.postgres); err != nil {
		return fmt.Errorf("starting postgres: %w", err)
	}
	if err := c.Attach(s.postgres.Process.Pid); err != nil {
		return err
	}
	if _, err := stdin.Write([]byte("go\n")); err != nil {
		return err
	}
	return waitFor(30*time.Second, "postgres to accept connections", func() error {
		out, err := exec.Command(filepath.Join(pgBin, "pg_isready"), "-h", s.dir, "-U", "postgres").CombinedOutput()
		if err != nil {
			return fmt.Errorf("%w: %s", err, out)
		}
		return nil
	})
}

func (s *server) data() string { return filepath.Join(s.dir, "data") }

func (s *server) asPostgres(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Dir = s.dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: s.uid, Gid: s.gid}}
	return cmd
}

func (s *server) pgbench(args ...string) (string, error) {
	out, err := exec.Command("pgbench", append([]string{"-h", s.dir, "-U", "postgres", "postgres"}, args...)...).CombinedOutput()
	return string(out), err
}

var tpsLine = regexp.MustCompile(`(?m)^tps = ([0-9.]+)`)

// bench runs pgbench -C -S for o.storm and returns its transactions per second.
func (s *server) bench(o options) (float64, error) {
	out, err := s.pgbench("-C", "-S", "-n", "-c", strconv.Itoa(o.clients), "-j", strconv.Itoa(min(o.clients, 2)), "-T", strconv.Itoa(int(o.storm.Seconds())))
	if err != nil {
		return 0, fmt.Errorf("pgbench: %w\n%s", err, out)
	}
	m := tpsLine.FindStringSubmatch(out)
	if m == nil {
		return 0, fmt.Errorf("no tps line in pgbench's output:\n%s", out)
	}
	return strconv.ParseFloat(m[1], 64)
}

// benchWithAgent starts the agent selecting the server's container, runs bench, samples
// the backends meanwhile (with the emulator), and stops the agent.
func (s *server) benchWithAgent(o options) (tps float64, sampled, nPlaced int, err error) {
	dir, err := os.MkdirTemp("", "forkcost-agent-")
	if err != nil {
		return 0, 0, 0, err
	}
	defer os.RemoveAll(dir)
	stateDir := filepath.Join(dir, "state")
	if err := writeDesired(stateDir, desire.Desire{
		Pod: types.NamespacedName{Namespace: "ns", Name: "forkserver"}, PodUID: types.UID(serverPodID), Container: "db",
		Ref:  cgroups.ContainerRef{PodUID: serverPodID, QOS: corev1.PodQOSGuaranteed, ContainerID: s.container.ContainerID},
		Node: 0,
	}); err != nil {
		return 0, 0, 0, err
	}
	args := []string{"-state-dir", stateDir, "-kubelet-cgroup-root", s.lab.KubeletCgroupRoot(), "-rescan-interval", o.rescan.String()}
	if o.profile != "" {
		args = append(args, "-profile", o.profile)
	}
	emu := ""
	if o.kernel == "emulated" {
		emu = filepath.Join(dir, "emulator")
		args = append(args, "-emulator-state-dir", emu)
	}
	agent, err := startAgent(o, dir, args...)
	if agent != nil {
		defer func() {
			_ = agent.Process.Signal(syscall.SIGTERM)
			_ = agent.Wait()
		}()
	}
	if err != nil {
		return 0, 0, 0, err
	}
	if emu != "" {
		if err := waitFor(30*time.Second, "the postmaster placed", func() error { return placed(emu, s.postgres.Process.Pid) }); err != nil {
			return 0, 0, 0, err
		}
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			sampled, nPlaced = s.sampleBackends(emu, stop)
		}()
		defer func() { close(stop); wg.Wait() }()
	}
	w, err := sample(agent.Process.Pid, func() error {
		var err error
		tps, err = s.bench(o)
		return err
	})
	if err == nil {
		fmt.Printf("  with the agent: its CPU %.1f ms/s, %.0f µs per fork of the host (%.0f forks/s)\n",
			w.cpuRate()/1e6, float64(w.cpu)/float64(max(w.forks, 1))/1e3, w.forkRate())
	}
	return tps, sampled, nPlaced, err
}

// sampleBackends reads the container's processes every 20 ms until stop and counts those
// older than 100 ms, and of them those the emulator shows placed.
func (s *server) sampleBackends(emuDir string, stop <-chan struct{}) (sampled, nPlaced int) {
	procs := filepath.Join(s.container.Dirs()[0], "cgroup.procs")
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return sampled, nPlaced
		case <-tick.C:
		}
		data, err := os.ReadFile(procs)
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(data)) {
			pid, _ := strconv.Atoi(f)
			if age, err := hostlab.ProcessAge(pid); err != nil || age < 100*time.Millisecond {
				continue
			}
			err := placed(emuDir, pid)
			if hostlab.Running(pid) { // a backend gone meanwhile is not counted
				sampled++
				if err == nil {
					nPlaced++
				}
			}
		}
	}
}

func (s *server) close() {
	if s.postgres != nil && s.postgres.Process != nil {
		_ = s.postgres.Process.Signal(syscall.SIGINT) // fast shutdown
		t := time.AfterFunc(20*time.Second, func() { _ = s.postgres.Process.Kill() })
		_ = s.postgres.Wait()
		t.Stop()
	}
	_ = s.lab.Close()
	if s.dir != "" {
		_ = os.RemoveAll(s.dir)
	}
}
