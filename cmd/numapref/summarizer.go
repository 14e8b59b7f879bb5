// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/numapref/numapref/controllers/agent"
	"github.com/numapref/numapref/controllers/summarizer"
	"github.com/numapref/numapref/internal/metrics"
)

// summaryLease names the summarizer's lease.
const summaryLease = "numapref-summary"

// summaryFlags are the summarizer's settings, the same for `numapref summarizer` and for an
// agent run with -leader-elect.
type summaryFlags struct {
	namespace                                 string
	leaseDuration, renewDeadline, retryPeriod time.Duration
	quiet, maxDelay, perNode                  time.Duration
	maxPerNamespace                           int
}

func (f *summaryFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.namespace, "leader-election-namespace", os.Getenv("POD_NAMESPACE"), "namespace of the summarizer's lease")
	// The summarizer only computes summaries, so a slow failover costs little and each
	// renewal is an API write: renew every 15 s instead of controller-runtime's 2 s.
	fs.DurationVar(&f.leaseDuration, "leader-election-lease-duration", 60*time.Second, "how long a lost leader keeps the summary lease")
	fs.DurationVar(&f.renewDeadline, "leader-election-renew-deadline", 45*time.Second, "how long the leader keeps trying to renew before it gives up")
	fs.DurationVar(&f.retryPeriod, "leader-election-retry-period", 15*time.Second, "how often the leader renews (one API write each) and others try")
	fs.DurationVar(&f.quiet, "summary-quiet", time.Second, "the elected summarizer writes a preference's status once its reports have been quiet this long ...")
	fs.DurationVar(&f.maxDelay, "summary-max-delay", 5*time.Second, "... or this long after the first unwritten change")
	fs.IntVar(&f.maxPerNamespace, "max-preferences-per-namespace", summarizer.DefaultMaxPerNamespace,
		"how many NumaPreferences of one namespace are applied, the oldest first; the summarizer marks the others TooManyPreferences and every agent keeps only their names, "+
			"so that no tenant can grow the agents' and the summarizer's memory with objects (give the agents and the summarizer the same value; 0: no cap)")
	fs.DurationVar(&f.perNode, "summary-per-node", 10*time.Millisecond, "the max delay, and the least time between two status writes of a preference, are at least this much per node: every write reaches every agent")
}

// runnable campaigns for the summary lease and summarizes while it holds it
// (summarizer.RunSummarizer): losing the lease stops only the summarizer, which campaigns
// again.
func (f *summaryFlags) runnable(mgr manager.Manager) manager.Runnable {
	election := summarizer.ElectionOptions{Namespace: f.namespace, ID: summaryLease,
		LeaseDuration: f.leaseDuration, RenewDeadline: f.renewDeadline, RetryPeriod: f.retryPeriod}
	summary := summarizer.SummaryOptions{Quiet: f.quiet, MaxDelay: f.maxDelay, PerNode: f.perNode, MaxPerNamespace: f.maxPerNamespace}
	return summarizer.RunSummarizer(mgr.GetConfig(), mgr.GetScheme(), election, summary)
}

// summarizerFlags are the summarizer process's flags: its API client and probes, and the
// summary's own (summaryFlags).
type summarizerFlags struct {
	kubeconfig, probeAddr, metricsAddr string
	summary                            summaryFlags
}

func (f *summarizerFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "path to a kubeconfig; empty: in-cluster")
	fs.StringVar(&f.probeAddr, "health-probe-bind-address", ":8082", "health probe address")
	fs.StringVar(&f.metricsAddr, "metrics-bind-address", "0", `plain-HTTP metrics address (the summary controller's queue and the API requests); "0" disables it`)
	f.summary.register(fs)
}

// runSummarizer is `numapref summarizer`: the summarizer Deployment's process. Its replicas
// elect one leader, which adds up the NumaNodeReports into each NumaPreference's status.
// It touches no host: it needs neither root nor any capability.
func runSummarizer(args []string) error {
	var f summarizerFlags
	fs := flag.NewFlagSet("summarizer", flag.ContinueOnError)
	f.register(fs)
	if err := parseWithLogFlags(fs, args); err != nil {
		return err
	}
	if f.summary.namespace == "" {
		return fmt.Errorf("summarizer: -leader-election-namespace (or POD_NAMESPACE) is required")
	}
	if f.summary.maxPerNamespace < 0 {
		return fmt.Errorf("summarizer: -max-preferences-per-namespace must be 0 (no cap) or more, not %d", f.summary.maxPerNamespace)
	}
	mgr, err := newSummarizerManager(f.kubeconfig, f.probeAddr, f.metricsAddr)
	if err != nil {
		return err
	}
	if err := mgr.Add(f.summary.runnable(mgr)); err != nil {
		return fmt.Errorf("summarizer: adding the summarizer: %w", err)
	}
	ctx := ctrl.SetupSignalHandler()
	return mgr.Start(ctx)
}

// newSummarizerManager makes the process's manager: health probes and metrics only. The
// summarizer's own manager, made anew at each campaign, holds the lease and the caches.
func newSummarizerManager(kubeconfig, probeAddr, metricsAddr string) (manager.Manager, error) {
	cfg, scheme, err := apiClientSetup("summarizer", kubeconfig, metrics.RegisterSummarizer)
	if err != nil {
		return nil, err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		MapperProvider:         agent.NodeRESTMapper, // starts while the API is unreachable
		Metrics:                metricsserver.Options{BindAddress: metricsAddr},
		HealthProbeBindAddress: probeAddr,
	})
	if err != nil {
		return nil, fmt.Errorf("summarizer: creating manager: %w", err)
	}
	if err := addHealthChecks(mgr, "summarizer"); err != nil {
		return nil, err
	}
	return mgr, nil
}
