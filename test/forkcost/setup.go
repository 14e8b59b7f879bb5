// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/numapref/numapref/internal/nodeagent/cgroups"
	"github.com/numapref/numapref/internal/nodeagent/desire"
	"github.com/numapref/numapref/internal/numa"
	"github.com/numapref/numapref/internal/statedir"
	"github.com/numapref/numapref/internal/testutil/hostlab"
)

// setup is the lab containers, their workloads and the agent under measurement. The first
// container's workload is the one that forks (selectedForks); -containers adds others, each
// with a workload of its own, all selected.
type setup struct {
	lab       *hostlab.Lab
	workload  *hostlab.Workload
	container *hostlab.Container
	others    []*hostlab.Container
	workloads []*hostlab.Workload // every container's, workload first
	agent     *exec.Cmd
	dir       string
	emuDir    string
}

const podUID = "24242424-2222-3333-4444-555555555555"

// setUp makes the lab's one selected container, starts its workload and the agent, and
// waits until the agent runs (with the emulator: until it placed the workload).
func setUp(o options) (*setup, error) {
	lab, err := hostlab.New("/sys/fs/cgroup")
	if err != nil {
		return nil, err
	}
	s := &setup{lab: lab}
	if err := s.start(o); err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

func (s *setup) start(o options) error {
	desires, err := s.startContainers(o)
	if err != nil {
		return err
	}
	if s.dir, err = os.MkdirTemp("", "forkcost-"); err != nil {
		return err
	}
	stateDir := filepath.Join(s.dir, "state")
	if err := writeDesired(stateDir, desires...); err != nil {
		return err
	}
	args := []string{"-state-dir", stateDir, "-kubelet-cgroup-root", s.lab.KubeletCgroupRoot(), "-rescan-interval", o.rescan.String()}
	if o.profile != "" {
		args = append(args, "-profile", o.profile)
	}
	if o.kernel == "emulated" {
		s.emuDir = filepath.Join(s.dir, "emulator")
		args = append(args, "-emulator-state-dir", s.emuDir)
	}
	if s.agent, err = startAgent(o, s.dir, args...); err != nil {
		return err
	}
	if o.kernel == "emulated" {
		if err := waitFor(60*time.Second, "every workload placed", func() error {
			for _, w := range s.workloads {
				if err := placed(s.emuDir, w.Pid()); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			return err
		}
	}
	// Let the start's passes and caches settle before the quiet window.
	time.Sleep(3 * time.Second)
	return nil
}

// startContainers makes o.containers lab containers of one pod each, starts a workload in
// each, and returns the desired state that selects them all (node 0).
func (s *setup) startContainers(o options) ([]desire.Desire, error) {
	var desires []desire.Desire
	for i := range max(o.containers, 1) {
		uid, id := podUID, strings.Repeat("24", 32)
		if i > 0 {
			uid, id = fmt.Sprintf("26262626-2222-3333-4444-%012d", i), fmt.Sprintf("%s%04x", strings.Repeat("26", 30), i)
		}
		c, err := s.lab.Container(corev1.PodQOSGuaranteed, uid, id)
		if err != nil {
			return nil, err
		}
		w, err := c.StartWorkload(o.threads)
		if err != nil {
			return nil, err
		}
		if i == 0 {
			s.container, s.workload = c, w
		} else {
			s.others = append(s.others, c)
		}
		s.workloads = append(s.workloads, w)
		desires = append(desires, desire.Desire{
			Pod: types.NamespacedName{Namespace: "ns", Name: fmt.Sprintf("forkcost-%d", i)}, PodUID: types.UID(uid), Container: "app",
			Ref:  cgroups.ContainerRef{PodUID: uid, QOS: corev1.PodQOSGuaranteed, ContainerID: c.ContainerID},
			Node: 0,
		})
	}
	return desires, nil
}

func (s *setup) close() {
	if s.agent != nil {
		// SIGTERM first: a clean exit writes the agent's profiles.
		_ = s.agent.Process.Signal(syscall.SIGTERM)
		t := time.AfterFunc(45*time.Second, func() { _ = s.agent.Process.Kill() })
		_ = s.agent.Wait()
		t.Stop()
	}
	for _, w := range s.workloads {
		w.Stop()
	}
	_ = s.lab.Close()
	if s.dir != "" {
		_ = os.RemoveAll(s.dir)
	}
}

// placed says whether the emulator whose state is in emuDir holds node 0 for every task of
// process pid.
func placed(emuDir string, pid int) error {
	tids, err := hostlab.TasksOf(pid)
	if err != nil {
		return err
	}
	taskDir := filepath.Join(emuDir, "proc", strconv.Itoa(pid), "task")
	for _, tid := range tids {
		sched, err := numa.ReadSchedNUMA(taskDir, tid)
		if err != nil {
			return fmt.Errorf("task %d not placed: %w", tid, err)
		}
		if sched.PreferredNIDForce != 0 {
			return fmt.Errorf("task %d holds %d", tid, sched.PreferredNIDForce)
		}
	}
	return nil
}

// selectedForks makes the workload fork n times, spread over d, and returns each child's
// time from the fork until the emulator shows it placed.
func (s *setup) selectedForks(n int, d time.Duration) ([]time.Duration, error) {
	gap := d / time.Duration(n+1)
	var lags []time.Duration
	for range n {
		time.Sleep(gap)
		began := time.Now()
		child, err := s.workload.RawFork()
		if err != nil {
			return lags, err
		}
		deadline := began.Add(5 * time.Second)
		for placed(s.emuDir, child) != nil {
			if time.Now().After(deadline) {
				return lags, fmt.Errorf("selected child %d not placed within 5s", child)
			}
			time.Sleep(100 * time.Microsecond)
		}
		lags = append(lags, time.Since(began))
	}
	return lags, nil
}

// printMemory prints the agent's resident memory (VmRSS, RssAnon, RssFile of its status).
func (s *setup) printMemory() error {
	m, err := hostlab.ProcessMemory(s.agent.Process.Pid)
	if err != nil {
		return err
	}
	fmt.Printf("memory containers=%d vmrss_kib=%d rssanon_kib=%d rssfile_kib=%d\n", len(s.workloads), m.RSS, m.Anon, m.File)
	return nil
}

// writeDesired persists a desired state as the agent's engine writes it.
func writeDesired(stateDir string, desires ...desire.Desire) error {
	data, err := json.Marshal(struct {
		Version int             `json:"version"`
		Desires []desire.Desire `json:"desires"`
	}{1, desires})
	if err != nil {
		return err
	}
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return err
	}
	return os.WriteFile(statedir.New(stateDir).Desired(), data, 0o600)
}
