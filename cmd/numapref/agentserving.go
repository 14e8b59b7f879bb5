// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/numapref/numapref/controllers/agentcert"
	"github.com/numapref/numapref/internal/inspect"
	"github.com/numapref/numapref/internal/nodeagent"
	"github.com/numapref/numapref/internal/nodeagent/cgroups"
	"github.com/numapref/numapref/internal/serving"
)

// The agent's HTTPS port: metrics and inspect behind token review and access review, with
// a certificate from a directory or the node's own from the CSR API.

// addSecureServer serves /metrics and GET /inspect/<namespace>/<pod> on the metrics port
// (internal/serving): HTTPS with the certificate of -tls-cert-dir, every request's token
// reviewed (TokenReview) for the route's audiences and get on its URL authorized
// (SubjectAccessReview); inspect also asks get on the pod. Inspect takes only tokens bound
// to serving.AgentAudience: what kubectl numapref sends cannot be replayed against the API
// server. Without -metrics-secure the manager serves plain metrics and inspect is not
// served: it would show this node's pods to anyone who can reach the port. Pods are read
// from the manager's cache, which holds this node's only.
func addSecureServer(mgr ctrl.Manager, f *agentFlags, engine *nodeagent.Engine, node *cgroups.NodeIdentity) error {
	log := ctrl.Log.WithName("agent")
	if !f.secureMetrics {
		log.Info("Inspect endpoint disabled: it is only served with -metrics-secure")
		return nil
	}
	if f.metricsAddr == "0" {
		return nil
	}
	cs, err := newReviewClients(mgr.GetConfig(), mgr.GetHTTPClient())
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	policy, skipped := serving.LearnTokenPolicy(ctx, mgr.GetConfig(), cs.discovery.RESTClient())
	log.Info("Tokens are checked locally before any review", "issuer", policy.Issuer, "apiAudiences", policy.APIAudiences, "notChecked", skipped)
	auth, err := serving.NewAuth(serving.AuthOptions{
		Tokens: cs.authentication.TokenReviews(), Access: cs.authorization.SubjectAccessReviews(),
		TTLs: serving.DefaultCacheTTLs(), Policy: policy,
	})
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	cache := mgr.GetCache()
	pods := func(ctx context.Context, namespace, name string) (*corev1.Pod, error) {
		pod := &corev1.Pod{}
		return pod, cache.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, pod)
	}
	getCert, err := nodeCertificate(mgr, f, cs)
	if err != nil {
		return err
	}
	srv, err := serving.NewServer(serving.Options{
		BindAddress: f.metricsAddr, CertDir: f.tlsCertDir, GetCertificate: getCert, Auth: auth, Limits: serving.DefaultLimits(), Log: ctrl.Log.WithName("serving"),
		Routes: serving.AgentRoutes(
			promhttp.HandlerFor(ctrlmetrics.Registry, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError}),
			inspect.PathPrefix, inspect.NewHandler(nodeagent.NewPodInspector(node, pods, engine), auth),
			f.metricsAgentOnly),
	})
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	if err := mgr.Add(srv); err != nil {
		return fmt.Errorf("agent: adding the metrics and inspect server: %w", err)
	}
	return nil
}

// nodeCertificate, with -tls-node-certificate, obtains and renews this node's own serving
// certificate through the CSR API (agentcert.NodeCertificate) and returns where the server
// gets it; otherwise nil (the certificate of -tls-cert-dir). Until the first is issued the
// TLS port serves nothing and the agent is not ready ("serving-certificate").
func nodeCertificate(mgr ctrl.Manager, f *agentFlags, cs agentcert.NodeCertificateClient) (func(*tls.ClientHelloInfo) (*tls.Certificate, error), error) {
	if !f.nodeCertificate {
		return nil, nil
	}
	if f.tlsCertDir != "" {
		return nil, errors.New("agent: -tls-node-certificate and -tls-cert-dir are exclusive")
	}
	c := &agentcert.NodeCertificate{Client: cs, Node: f.nodeName, Lifetime: f.nodeCertLifetime, Log: ctrl.Log.WithName("node-certificate")}
	if err := mgr.Add(c); err != nil {
		return nil, fmt.Errorf("agent: adding the node certificate: %w", err)
	}
	if err := mgr.AddReadyzCheck("serving-certificate", c.Ready); err != nil {
		return nil, fmt.Errorf("agent: adding the node certificate's ready check: %w", err)
	}
	return c.GetCertificate, nil
}
