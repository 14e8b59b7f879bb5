// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package summarizer

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/numapref/numapref/controllers/internal/runnable"
)

// ElectionOptions are the summarizer's leader election settings.
type ElectionOptions struct {
	Namespace, ID                             string
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
}

// RunSummarizer returns a node-local runnable that campaigns for the summarizer's lease and,
// while it holds it, runs the summarizer (SetupSummary) in a manager of its own. Losing the
// lease (an apiserver too slow to renew it, say) stops only the summarizer, which then
// campaigns again: the node agent beside it keeps enforcing on its node, as it would not if
// the lease were the agent manager's, whose loss ends the process.
func RunSummarizer(cfg *rest.Config, scheme *runtime.Scheme, election ElectionOptions, opts SummaryOptions) manager.Runnable {
	var clk clock.Clock = clock.RealClock{}
	return runnable.NodeLocal(func(ctx context.Context) error {
		log := ctrl.LoggerFrom(ctx).WithName("summarizer")
		for {
			err := runSummarizerOnce(ctx, cfg, scheme, election, opts)
			if ctx.Err() != nil {
				return nil
			}
			log.Error(err, "Summarizer stopped; campaigning again", "retryIn", election.RetryPeriod)
			select {
			case <-ctx.Done():
				return nil
			case <-clk.After(election.RetryPeriod):
			}
		}
	})
}

func runSummarizerOnce(ctx context.Context, cfg *rest.Config, scheme *runtime.Scheme, election ElectionOptions, opts SummaryOptions) error {
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:  scheme,
		Metrics: metricsserver.Options{BindAddress: "0"},
		// Each campaign makes the summary controller anew, under the same name (its
		// metrics go on); the one before it has stopped.
		Controller:                    config.Controller{SkipNameValidation: ptr.To(true)},
		HealthProbeBindAddress:        "0",
		LeaderElection:                true,
		LeaderElectionID:              election.ID,
		LeaderElectionNamespace:       election.Namespace,
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 &election.LeaseDuration,
		RenewDeadline:                 &election.RenewDeadline,
		RetryPeriod:                   &election.RetryPeriod,
	})
	if err != nil {
		return fmt.Errorf("creating the summarizer's manager: %w", err)
	}
	if err := SetupSummary(mgr, opts); err != nil {
		return err
	}
	return mgr.Start(ctx)
}
