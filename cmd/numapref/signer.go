// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/numapref/numapref/controllers/agent"
	"github.com/numapref/numapref/controllers/agentcert"
	"github.com/numapref/numapref/internal/inspect"
)

// signerFlags are the signer's: what it keeps (its CA), signs (the agents' node
// certificates), publishes (the CA ConfigMap) and renews (the scraper's token).
type signerFlags struct {
	kubeconfig, probeAddr, namespace string
	caSecret, agentSA, owner         string
	caValidity                       time.Duration
	publishFrom, serverName          string
	scraperSecret, scraperSA         string
	scraperLifetime                  time.Duration
}

func (f *signerFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "path to a kubeconfig; empty: in-cluster")
	fs.StringVar(&f.probeAddr, "health-probe-bind-address", ":8083", "health probe address")
	fs.StringVar(&f.namespace, "namespace", os.Getenv("POD_NAMESPACE"), "the signer's namespace (downward API: POD_NAMESPACE), where every Secret and ConfigMap it keeps is")
	fs.StringVar(&f.caSecret, "ca-secret", "", "the Secret holding the CA that signs each agent's node certificate (signer "+agentcert.AgentServingSigner+"); made, with a new CA, when it does not exist: "+
		"no Helm release or manifest holds the key. Empty: no CA, no signing")
	fs.DurationVar(&f.caValidity, "ca-validity", 10*365*24*time.Hour, "the life of a CA made in -ca-secret")
	fs.StringVar(&f.agentSA, "agent-service-account", "", "the agents' ServiceAccount, in the signer's namespace: the only requester whose node certificates are signed")
	fs.StringVar(&f.publishFrom, "publish-ca-from-secret", "", "without -ca-secret: publish key ca.crt of this Secret (cert-manager's serving certificate) as the agents' CA")
	fs.StringVar(&f.serverName, "server-name", "", "with -publish-ca-from-secret: the one name every agent's shared certificate carries, published beside the CA (empty: each agent serves its node's own, verify: node)")
	fs.StringVar(&f.owner, "owner-service-account", "", "the signer's own ServiceAccount: it owns what the signer writes, so that the garbage collector removes it with the release")
	fs.StringVar(&f.scraperSecret, "scraper-token-secret", "", "keep a token of -scraper-service-account, bound to the audience "+agentcert.AgentAudience+", in this Secret (the PodMonitor's); empty: none")
	fs.StringVar(&f.scraperSA, "scraper-service-account", "", "the ServiceAccount Prometheus scrapes the agents with")
	fs.DurationVar(&f.scraperLifetime, "scraper-token-lifetime", time.Hour, "the life of each scraper token; a new one replaces it at half its life")
}

func (f *signerFlags) check() error {
	switch {
	case f.namespace == "":
		return errors.New("signer: -namespace (or POD_NAMESPACE) is required")
	case f.caSecret != "" && f.agentSA == "":
		return errors.New("signer: -ca-secret needs -agent-service-account")
	case f.caSecret != "" && f.publishFrom != "":
		return errors.New("signer: -ca-secret and -publish-ca-from-secret exclude each other")
	case (f.scraperSecret == "") != (f.scraperSA == ""):
		return errors.New("signer: -scraper-token-secret and -scraper-service-account go together")
	case f.scraperSecret != "" && f.scraperLifetime < 10*time.Minute:
		return fmt.Errorf("signer: -scraper-token-lifetime must be 10m (the API's least) or more, not %s", f.scraperLifetime)
	}
	return nil
}

// runSigner is `numapref signer`: the signer Deployment's process, one replica, on a
// control-plane node where the cluster has them. It holds the only copy of the CA key,
// which is why it runs apart from the summarizer: its cache holds the agents' CSRs and the
// Nodes' addresses, nothing a tenant can grow, so no tenant can stop the certificates.
func runSigner(args []string) error {
	var f signerFlags
	fs := flag.NewFlagSet("signer", flag.ContinueOnError)
	f.register(fs)
	if err := parseWithLogFlags(fs, args); err != nil {
		return err
	}
	if err := f.check(); err != nil {
		return err
	}
	cfg, scheme, err := apiClientSetup("signer", f.kubeconfig, func(prometheus.Registerer) error { return nil })
	if err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: scheme, MapperProvider: agent.NodeRESTMapper,
		Cache:                  cache.Options{ByObject: agentcert.SignerCacheByObject()},
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: f.probeAddr,
	})
	if err != nil {
		return fmt.Errorf("signer: creating manager: %w", err)
	}
	if err := addHealthChecks(mgr, "signer"); err != nil {
		return err
	}
	ctx := ctrl.SetupSignalHandler()
	direct, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return fmt.Errorf("signer: %w", err)
	}
	if err := f.addJobs(ctx, mgr, direct); err != nil {
		return err
	}
	return mgr.Start(ctx)
}

// addJobs sets up what the flags ask: the CA and the signing, the CA's publication, the
// scraper's token. The CA is read (or made) first, waiting for the API as long as it takes.
func (f *signerFlags) addJobs(ctx context.Context, mgr ctrl.Manager, c client.Client) error {
	log := ctrl.Log.WithName("signer")
	owners, err := retry(ctx, func() ([]metav1.OwnerReference, error) { return agentcert.OwnedBy(ctx, c, f.namespace, f.owner) })
	if err != nil {
		return err
	}
	publisher := &agentcert.CAPublisher{Client: c, Namespace: f.namespace, Name: inspect.CAConfigMap, Owners: owners,
		FromSecret: f.publishFrom, Data: map[string]string{inspect.CAConfigMapVerifyKey: "node"}, Log: log}
	if f.serverName != "" {
		publisher.Data = map[string]string{inspect.CAConfigMapNameKey: f.serverName}
	}
	if f.caSecret != "" {
		ca := agentcert.CASecret{Namespace: f.namespace, Name: f.caSecret, Validity: f.caValidity, Owners: owners}
		pems, err := retry(ctx, func() ([2][]byte, error) {
			cert, key, err := ca.Ensure(ctx, c, time.Now())
			return [2][]byte{cert, key}, err
		})
		if err != nil {
			return err
		}
		opts := agentcert.SignerOptions{CACertPEM: pems[0], CAKeyPEM: pems[1], AgentNamespace: f.namespace, AgentServiceAccount: f.agentSA}
		if err := agentcert.SetupAgentCertSigner(mgr, opts); err != nil {
			return fmt.Errorf("signer: %w", err)
		}
		publisher.CACert = pems[0]
	}
	if f.caSecret != "" || f.publishFrom != "" {
		if err := mgr.Add(publisher); err != nil {
			return fmt.Errorf("signer: adding the CA's publisher: %w", err)
		}
		if err := mgr.AddReadyzCheck("ca-published", publisher.Ready); err != nil {
			return fmt.Errorf("signer: adding the CA's readiness check: %w", err)
		}
	}
	if f.scraperSecret != "" {
		token := &agentcert.ScraperToken{Client: c, Namespace: f.namespace, ServiceAccount: f.scraperSA, Secret: f.scraperSecret,
			Lifetime: f.scraperLifetime, Owners: owners, Log: log}
		if err := mgr.Add(token); err != nil {
			return fmt.Errorf("signer: adding the scraper's token: %w", err)
		}
	}
	return nil
}

// retry calls do until it succeeds or ctx is done, logging each failure: the signer waits
// for the API at start rather than exit (its readiness is its health port's).
func retry[T any](ctx context.Context, do func() (T, error)) (T, error) {
	backoff := time.Second
	for {
		v, err := do()
		if err == nil {
			return v, nil
		}
		ctrl.Log.WithName("signer").Error(err, "Retrying", "in", backoff)
		select {
		case <-ctx.Done():
			return v, fmt.Errorf("signer: %w", err)
		case <-time.After(backoff):
			backoff = min(2*backoff, time.Minute)
		}
	}
}
