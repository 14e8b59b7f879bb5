// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package nri

import (
	"context"
	"fmt"
	"maps"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/nri/pkg/stub"
	"github.com/go-logr/logr"

	"github.com/numapref/numapref/internal/numa/mempolicy"
)

// The stub subscribes the plugin to the events whose handlers conn has: CreateContainer
// and StartContainer. Synchronize is not an event; the runtime always calls it at
// registration.
var (
	_ stub.CreateContainerInterface = (*conn)(nil)
	_ stub.StartContainerInterface  = (*conn)(nil)
	_ stub.SynchronizeInterface     = (*conn)(nil)
)

// CreateContainer asks the placer for the memory policy of the container the runtime is
// creating, and answers with it as the container's adjustment (linux.memoryPolicy, which
// the OCI runtime sets in the container's init before exec), or with no adjustment: for an
// unselected container, one without a home, or when the placer misses its deadline. It
// never fails the creation.
func (c *conn) CreateContainer(ctx context.Context, pod *api.PodSandbox, ctr *api.Container) (*api.ContainerAdjustment, []*api.ContainerUpdate, error) {
	c.p.stats.creates.Add(1)
	s := startOf(pod, ctr, false)
	answer := make(chan *mempolicy.OCIPolicy, 1) // a late placer's answer is dropped
	c.p.bounded(ctx, s, func(pctx context.Context) { answer <- c.p.cfg.Placer.PolicyAtCreation(pctx, s) })
	var pol *mempolicy.OCIPolicy
	select {
	case pol = <-answer:
	default:
	}
	if pol == nil {
		return nil, nil, nil
	}
	adj, err := memoryPolicyAdjustment(*pol)
	if err != nil {
		c.p.cfg.Log.Error(err, "Not giving the memory policy: NRI cannot spell it", "pod", s.Namespace+"/"+s.PodName, "container", s.Container)
		return nil, nil, nil
	}
	c.p.stats.policies.Add(1)
	return adj, nil, nil
}

// memoryPolicyAdjustment is the adjustment that gives a container memory policy o,
// converted to NRI's enums by name (mempolicy.OCIPolicy).
func memoryPolicyAdjustment(o mempolicy.OCIPolicy) (*api.ContainerAdjustment, error) {
	mode, ok := api.MpolMode_value[o.Mode]
	if !ok {
		return nil, fmt.Errorf("memory policy mode %s: not an NRI mode", o.Mode)
	}
	flags := make([]api.MpolFlag, 0, len(o.Flags))
	for _, f := range o.Flags {
		v, ok := api.MpolFlag_value[f]
		if !ok {
			return nil, fmt.Errorf("memory policy flag %s: not an NRI flag", f)
		}
		flags = append(flags, api.MpolFlag(v))
	}
	adj := &api.ContainerAdjustment{}
	adj.SetLinuxMemoryPolicy(api.MpolMode(mode), o.Nodes, flags...)
	return adj, nil
}

// StartContainer hands the starting container to the placer and answers the runtime by the
// placer's deadline. It never fails the start.
func (c *conn) StartContainer(ctx context.Context, pod *api.PodSandbox, ctr *api.Container) error {
	c.p.stats.starts.Add(1)
	c.p.place(ctx, startOf(pod, ctr, false))
	return nil
}

// Synchronize ends registration: the runtime lists its pods and containers. The running
// ones go to the placer one after another in the background, each with RequestTimeout:
// the runtime's one request timeout covers the whole Synchronize, which must not wait for
// placements of every container of the node. It asks for no update.
func (c *conn) Synchronize(_ context.Context, pods []*api.PodSandbox, ctrs []*api.Container) ([]*api.ContainerUpdate, error) {
	starts := runningStarts(pods, ctrs)
	c.synced.Store(true)
	c.p.setConnected(true)
	c.p.stats.connects.Add(1)
	c.p.cfg.Log.Info("NRI runtime connected", "socket", c.p.cfg.Socket, "runningContainers", len(starts))
	go func() {
		for _, s := range starts {
			if c.ctx.Err() != nil {
				return
			}
			c.p.stats.synced.Add(1)
			c.p.place(c.ctx, s)
		}
	}()
	return nil, nil
}

// runningStarts are the containers of a Synchronize that have tasks (running or paused),
// with their pods. A created container gets its StartContainer later; a stopped one has
// no tasks.
func runningStarts(pods []*api.PodSandbox, ctrs []*api.Container) []Start {
	byID := make(map[string]*api.PodSandbox, len(pods))
	for _, pod := range pods {
		byID[pod.GetId()] = pod
	}
	var out []Start
	for _, ctr := range ctrs {
		switch ctr.GetState() {
		case api.ContainerState_CONTAINER_RUNNING, api.ContainerState_CONTAINER_PAUSED:
			out = append(out, startOf(byID[ctr.GetPodSandboxId()], ctr, true))
		}
	}
	return out
}

// startOf is the Start of container ctr of pod. Either may be nil (the proto getters
// return zero values then).
func startOf(pod *api.PodSandbox, ctr *api.Container, running bool) Start {
	return Start{
		PodUID:      pod.GetUid(),
		Namespace:   pod.GetNamespace(),
		PodName:     pod.GetName(),
		Labels:      maps.Clone(pod.GetLabels()),
		Annotations: maps.Clone(pod.GetAnnotations()),
		Container:   ctr.GetName(),
		ContainerID: ctr.GetId(),
		Pid:         int(ctr.GetPid()),
		CgroupsPath: ctr.GetLinux().GetCgroupsPath(),
		CpusetMems:  ctr.GetLinux().GetResources().GetCpu().GetMems(),
		CpusetCPUs:  ctr.GetLinux().GetResources().GetCpu().GetCpus(),
		Running:     running,
	}
}

// place calls the placer with a deadline of RequestTimeout, and never later than
// replyMargin before ctx's (the runtime's request's), and returns when the placer does or
// the deadline passes. A placer still running then is abandoned, not waited for: the
// runtime must have its answer, and the next request must not queue behind it. Its ctx
// is done; Stats counts it in Late and, until it returns, in LateRunning.
func (p *Plugin) place(ctx context.Context, s Start) {
	p.bounded(ctx, s, func(pctx context.Context) { p.cfg.Placer.PlaceAtStart(pctx, s) })
}

// bounded runs call, the placer's work for container s, as place describes.
func (p *Plugin) bounded(ctx context.Context, s Start, call func(context.Context)) {
	deadline := time.Now().Add(p.cfg.RequestTimeout)
	if d, ok := ctx.Deadline(); ok && d.Add(-replyMargin).Before(deadline) {
		deadline = d.Add(-replyMargin)
	}
	pctx, cancel := context.WithDeadline(ctx, deadline)
	const (
		running int32 = iota
		returned
		abandoned
	)
	var state atomic.Int32
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer cancel()
		// A placer's panic must not take the agent down, nor leave the runtime waiting.
		defer func() {
			if r := recover(); r != nil {
				p.stats.panics.Add(1)
				p.cfg.Log.Error(fmt.Errorf("%v", r), "placer panicked; answered the runtime without it",
					"pod", s.Namespace+"/"+s.PodName, "container", s.Container, "stack", string(debug.Stack()))
			}
		}()
		call(pctx)
		if !state.CompareAndSwap(running, returned) {
			p.stats.lateRunning.Add(^uint64(0)) // it was abandoned and counted
		}
	}()
	select {
	case <-done:
	case <-pctx.Done():
		p.stats.lateRunning.Add(1) // before the swap, so the placer's decrement follows it
		if state.CompareAndSwap(running, abandoned) {
			p.stats.late.Add(1)
			p.cfg.Log.Info("placer missed its deadline; answered the runtime without it",
				"pod", s.Namespace+"/"+s.PodName, "container", s.Container, "timeout", p.cfg.RequestTimeout)
		} else {
			p.stats.lateRunning.Add(^uint64(0)) // it returned just in time
		}
	}
}

// nriLogger routes the NRI library's log to the agent's: its routine lines at V(2), its
// debug lines at V(4).
type nriLogger struct{ log logr.Logger }

func (l nriLogger) Debugf(_ context.Context, format string, args ...any) {
	l.log.V(4).Info(fmt.Sprintf(format, args...))
}

func (l nriLogger) Infof(_ context.Context, format string, args ...any) {
	l.log.V(2).Info(fmt.Sprintf(format, args...))
}

func (l nriLogger) Warnf(_ context.Context, format string, args ...any) {
	l.log.Info(fmt.Sprintf(format, args...))
}

func (l nriLogger) Errorf(_ context.Context, format string, args ...any) {
	l.log.Error(nil, fmt.Sprintf(format, args...))
}
