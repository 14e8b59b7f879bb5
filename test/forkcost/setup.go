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

	"github.com/numapref/numapref/internal/nodeagent"
	"github.com/numapref/numapref/internal/nodeagent/cgroups"
	"github.com/numapref/numapref/internal/numa"
	"github.com/numapref/numapref/internal/testutil/hostlab"
)

// setup is the lab container, its workload and the agent under measurement.
type setup struct {
	lab       *hostlab.Lab
	workload  *hostlab.Workload
	container *hostlab.Container
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
	c, err := s.lab.Container(corev1.PodQOSGuaranteed, podUID, strings.Repeat("24", 32))
	if err != nil {
		return err
	}
	s.container = c
	if s.workload, err = c.StartWorkload(o.threads); err != nil {
		return err
	}
	if s.dir, err = os.MkdirTemp("", "forkcost-"); err != nil {
		return err
	}
	stateDir := filepath.Join(s.dir, "state")
	if err := writeDesired(stateDir, nodeagent.Desire{
		Pod: types.NamespacedName{Namespace: "ns", Name: "forkcost"}, PodUID: types.UID(podUID), Container: "app",
		Ref:  cgroups.ContainerRef{PodUID: podUID, QOS: corev1.PodQOSGuaranteed, ContainerID: c.ContainerID},
		Node: 0,
	}); err != nil {
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
	if s.agent, _, err = startAgent(o, s.dir, args...); err != nil {
		return err
	}
	if o.kernel == "emulated" {
		if err := waitFor(30*time.Second, "the workload placed", func() error { return s.placed(s.workload.Pid()) }); err != nil {
			return err
		}
	}
	// Let the start's passes and caches settle before the quiet window.
	time.Sleep(3 * time.Second)
	return nil
}

func (s *setup) close() {
	if s.agent != nil {
		// SIGTERM first: a clean exit writes the agent's profiles.
		_ = s.agent.Process.Signal(syscall.SIGTERM)
		t := time.AfterFunc(45*time.Second, func() { _ = s.agent.Process.Kill() })
		_ = s.agent.Wait()
		t.Stop()
	}
	if s.workload != nil {
		s.workload.Stop()
	}
	_ = s.lab.Close()
	if s.dir != "" {
		_ = os.RemoveAll(s.dir)
	}
}

// placed says whether the emulator holds node 0 for every task of process pid.
func (s *setup) placed(pid int) error {
	tids, err := hostlab.TasksOf(pid)
	if err != nil {
		return err
	}
	taskDir := filepath.Join(s.emuDir, "proc", strconv.Itoa(pid), "task")
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
		for s.placed(child) != nil {
			if time.Now().After(deadline) {
				return lags, fmt.Errorf("selected child %d not placed within 5s", child)
			}
			time.Sleep(100 * time.Microsecond)
		}
		lags = append(lags, time.Since(began))
	}
	return lags, nil
}

// writeDesired persists a desired state as the agent's engine writes it (desired.json).
func writeDesired(stateDir string, desires ...nodeagent.Desire) error {
	data, err := json.Marshal(struct {
		Version int                `json:"version"`
		Desires []nodeagent.Desire `json:"desires"`
	}{1, desires})
	if err != nil {
		return err
	}
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(stateDir, "desired.json"), data, 0o600)
}
