// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build integration

package agent

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/numapref/numapref/controllers/internal/status"
	"github.com/numapref/numapref/controllers/summarizer"
	"github.com/numapref/numapref/internal/testutil/ctrltest"
	"github.com/numapref/numapref/internal/testutil/hostlab"
)

// These specs run the agent's controllers against a real kube-apiserver and etcd
// (envtest): the integration tier (build tag integration). The binaries come from
// hack/k8s-binaries.sh through KUBEBUILDER_ASSETS (make integration sets it). The
// real-engine specs (realengine_test.go, outage_test.go) also need root. Specs that assert
// a preference's status run the summarizer beside the agents, as a cluster does.

// env is the suite's API server; env.Client reads it directly, never a manager's cache.
var env *ctrltest.Env

func TestMain(m *testing.M) {
	hostlab.RunWorkloadIfAsked() // workloads of the real-engine specs are this binary
	os.Exit(m.Run())
}

func TestAgent(t *testing.T) { ctrltest.RunSpecs(t, "Agent Suite") }

var _ = BeforeSuite(func() { env = ctrltest.Start(filepath.Join("..", "..", "config", "crd", "bases")) })

var _ = AfterSuite(func() { env.Stop() })

// The specs coalesce writes over short times, to run fast; the coalescing itself is
// tested with a fake clock (controllers/summarizer's TestSummaryCoalescing).
var (
	testAgentOptions = NodeAgentOptions{
		ReportInterval: 100 * time.Millisecond,
		Facts:          func() NodeFacts { return NodeFacts{KernelSupport: "emulator", NUMABalancing: "normal", NUMANodes: 1} },
	}
	testSummaryOptions = summarizer.SummaryOptions{Quiet: 50 * time.Millisecond, MaxDelay: 200 * time.Millisecond, MinInterval: 100 * time.Millisecond}
)

// agentSetup is how startAgent runs an agent; agentOptions change it.
type agentSetup struct {
	cfg         *rest.Config // how the agent reaches the apiserver
	opts        NodeAgentOptions
	summarize   bool // run the summary controller beside the agent
	summary     summarizer.SummaryOptions
	syncTimeout time.Duration // the manager's default CacheSyncTimeout (0: controller-runtime's 2 minutes)
	runnables   []manager.Runnable
}

type agentOption func(*agentSetup)

// withSummarizer runs the summary controller in the agent's manager.
func withSummarizer() agentOption { return func(s *agentSetup) { s.summarize = true } }

// withPreferenceCap gives the agent and its summarizer a cap of n NumaPreferences per
// namespace.
func withPreferenceCap(n int) agentOption {
	return func(s *agentSetup) {
		s.opts.PreferenceCap = NewPreferenceCap(n)
		s.summary.MaxPerNamespace = n
	}
}

// withConfig has the agent reach the apiserver through c instead of the suite's config.
func withConfig(c *rest.Config) agentOption { return func(s *agentSetup) { s.cfg = c } }

// withOptions sets the node agent's options instead of testAgentOptions.
func withOptions(o NodeAgentOptions) agentOption { return func(s *agentSetup) { s.opts = o } }

// withRunnables adds runnables to the agent's manager.
func withRunnables(r ...manager.Runnable) agentOption {
	return func(s *agentSetup) { s.runnables = append(s.runnables, r...) }
}

// withSyncTimeout sets the manager's default CacheSyncTimeout for its controllers
// (controller-runtime's is 2 minutes), so that a spec can outlast it.
func withSyncTimeout(d time.Duration) agentOption { return func(s *agentSetup) { s.syncTimeout = d } }

// runningAgent is an agent's manager, running until stop (or the spec's end).
type runningAgent struct {
	mgr  manager.Manager
	done <-chan struct{} // closed once the manager's Start returned
	stop func()
}

// startAgent runs a manager like the agent's for one node, with the given engine, until
// stop or the end of the spec: by default through the suite's config, with
// testAgentOptions and without the summarizer.
func startAgent(node string, engine Engine, options ...agentOption) *runningAgent {
	GinkgoHelper()
	s := agentSetup{cfg: env.Config, opts: testAgentOptions, summary: testSummaryOptions}
	for _, o := range options {
		o(&s)
	}
	if s.opts.PreferenceCap == nil {
		s.opts.PreferenceCap = NewPreferenceCap(status.DefaultMaxPreferencesPerNamespace)
	}
	mgr, err := ctrl.NewManager(s.cfg, ctrl.Options{
		Scheme:  env.Scheme,
		Cache:   NodeCacheOptions(node, s.opts.PreferenceCap),
		Metrics: metricsserver.Options{BindAddress: "0"},
		// Several agents share this test process; each has its own "nodeagent" controller.
		Controller:     config.Controller{SkipNameValidation: ptr.To(true), CacheSyncTimeout: s.syncTimeout},
		MapperProvider: NodeRESTMapper,
	})
	Expect(err).NotTo(HaveOccurred())
	env.EnsureNode(node)
	Expect(SetupNodeAgent(mgr, node, engine, s.opts)).To(Succeed())
	for _, r := range s.runnables {
		Expect(mgr.Add(r)).To(Succeed())
	}
	if s.summarize {
		Expect(summarizer.SetupSummary(mgr, s.summary)).To(Succeed())
	}
	a := &runningAgent{mgr: mgr}
	a.stop, a.done = env.RunManager(mgr)
	return a
}

// startSummarizerAs runs the summarizer alone through c (the summarizer's own identity,
// say), as the elected summarizer would, until the end of the spec.
func startSummarizerAs(c *rest.Config) {
	GinkgoHelper()
	mgr, err := ctrl.NewManager(c, ctrl.Options{
		Scheme: env.Scheme, Metrics: metricsserver.Options{BindAddress: "0"},
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	Expect(err).NotTo(HaveOccurred())
	Expect(summarizer.SetupSummary(mgr, testSummaryOptions)).To(Succeed())
	env.RunManager(mgr)
}
