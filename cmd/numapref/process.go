// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"flag"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/numapref/numapref/controllers/agent"
)

// What both processes, the agent and the summarizer, start with: the logger's flags, the
// API client and its metrics, the health checks.

// apiClientSetup loads the kubeconfig (empty: in-cluster), makes the scheme of the APIs
// numapref uses, registers the process's metrics with register (metrics.RegisterControllers
// or metrics.RegisterSummarizer) and counts every API request (numapref_api_requests_total):
// what the agent and the summarizer both start with.
func apiClientSetup(who, kubeconfig string, register func(prometheus.Registerer) error) (*rest.Config, *runtime.Scheme, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: loading kubeconfig: %w", who, err)
	}
	scheme, err := newScheme()
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", who, err)
	}
	if err := register(ctrlmetrics.Registry); err != nil {
		return nil, nil, fmt.Errorf("%s: registering metrics: %w", who, err)
	}
	agent.InstrumentAPI(cfg)
	return cfg, scheme, nil
}

// parseWithLogFlags parses args with the logger's flags (-zap-log-level, ...) added to fs,
// then sets controller-runtime's logger from them.
func parseWithLogFlags(fs *flag.FlagSet, args []string) error {
	zapOpts := zap.Options{}
	zapOpts.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	return nil
}

// addHealthChecks adds the liveness and readiness pings of who's manager.
func addHealthChecks(mgr ctrl.Manager, who string) error {
	for name, add := range map[string]func(string, healthz.Checker) error{"healthz": mgr.AddHealthzCheck, "readyz": mgr.AddReadyzCheck} {
		if err := add(name, healthz.Ping); err != nil {
			return fmt.Errorf("%s: adding the %s check: %w", who, name, err)
		}
	}
	return nil
}
