// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/controllers/agent"
	"github.com/numapref/numapref/controllers/summarizer"
	"github.com/numapref/numapref/internal/nodeagent/desire"
	"github.com/numapref/numapref/internal/nodeagent/plan"
)

// stubEngine stands in for the apply engine of one simulated node: every container the
// agent asks it to place is Applied, to tasks tasks. Its results follow SetDesired at once
// (a real engine needs a pass, then signals Changes), so only setTasks signals the agent.
type stubEngine struct {
	tasks   atomic.Int32
	mu      sync.Mutex
	desires []desire.Desire
	changes chan struct{}
}

func newStubEngine(tasks int32) *stubEngine {
	e := &stubEngine{changes: make(chan struct{}, 1)}
	e.tasks.Store(tasks)
	return e
}

func (e *stubEngine) SetDesired(ds []desire.Desire) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.desires = slices.Clone(ds)
}

func (e *stubEngine) Results() map[desire.ContainerKey]plan.Result {
	tasks := int(e.tasks.Load())
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make(map[desire.ContainerKey]plan.Result, len(e.desires))
	for _, d := range e.desires {
		res := plan.Result{Desire: d, Reason: numav1.ReasonApplied, Tasks: tasks}
		if d.Refusal != "" {
			res = plan.Result{Desire: d, Reason: d.Refusal, Message: d.Message}
		}
		out[d.Key()] = res
	}
	return out
}

func (e *stubEngine) Changes() <-chan struct{} { return e.changes }

// setTasks changes every container's task count and tells the agent.
func (e *stubEngine) setTasks(n int32) {
	e.tasks.Store(n)
	select {
	case e.changes <- struct{}{}:
	default:
	}
}

// stubFacts are the kernel facts every simulated node reports.
var stubFacts = agent.NodeFacts{KernelSupport: "emulator", NUMABalancing: "normal", NUMANodes: 2}

// manager runs one controller-runtime manager until ctx ends; a manager that fails
// reports it on errs.
func runManager(ctx context.Context, wg *sync.WaitGroup, mgr ctrl.Manager, name string, errs chan<- error) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := mgr.Start(ctx); err != nil {
			select {
			case errs <- fmt.Errorf("%s: %w", name, err):
			default:
			}
		}
	}()
}

// newManager makes a manager with its own connection to the apiserver, no metrics or
// probe server and no leader election (the harness runs exactly one summarizer).
func newManager(cfg *rest.Config, scheme *runtime.Scheme, configure func(*ctrl.Options)) (ctrl.Manager, error) {
	opts := ctrl.Options{
		Scheme:  scheme,
		Metrics: metricsserver.Options{BindAddress: "0"},
		// Many agents share this process; each has its own "nodeagent" controller.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	}
	if configure != nil {
		configure(&opts)
	}
	return ctrl.NewManager(rest.CopyConfig(cfg), opts)
}

// startSummarizer runs the real summarizer (summarizer.SetupSummary) in a manager of its
// own, with its default coalescing.
func startSummarizer(ctx context.Context, wg *sync.WaitGroup, cfg *rest.Config, scheme *runtime.Scheme, errs chan<- error) error {
	mgr, err := newManager(cfg, scheme, nil)
	if err != nil {
		return fmt.Errorf("creating the summarizer's manager: %w", err)
	}
	if err := summarizer.SetupSummary(mgr, summarizer.SummaryOptions{}); err != nil {
		return err
	}
	runManager(ctx, wg, mgr, "summarizer", errs)
	return nil
}

// startAgents runs one simulated agent per node, each with the agent's real controller
// and reporting code, its own manager, cache (NodeCacheOptions) and connection, and a
// stub engine. It returns the engines, by node index.
func startAgents(ctx context.Context, wg *sync.WaitGroup, cfg *rest.Config, scheme *runtime.Scheme, nodes int, tasks int32, reportInterval time.Duration, errs chan<- error) ([]*stubEngine, error) {
	engines := make([]*stubEngine, nodes)
	for i := range nodes {
		node := nodeName(i)
		capped := agent.NewPreferenceCap(summarizer.DefaultMaxPerNamespace)
		mgr, err := newManager(cfg, scheme, func(o *ctrl.Options) { o.Cache = agent.NodeCacheOptions(node, capped) })
		if err != nil {
			return nil, fmt.Errorf("creating the manager of %s: %w", node, err)
		}
		engines[i] = newStubEngine(tasks)
		opts := agent.NodeAgentOptions{Facts: func() agent.NodeFacts { return stubFacts }, ReportInterval: reportInterval, PreferenceCap: capped}
		if err := agent.SetupNodeAgent(mgr, node, engines[i], opts); err != nil {
			return nil, fmt.Errorf("setting up the agent of %s: %w", node, err)
		}
		runManager(ctx, wg, mgr, "agent "+node, errs)
	}
	return engines, nil
}
