// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"fmt"
	"net/http"

	appsv1 "k8s.io/api/apps/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	authenticationv1client "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationv1client "k8s.io/client-go/kubernetes/typed/authorization/v1"
	certificatesv1client "k8s.io/client-go/kubernetes/typed/certificates/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
)

// newScheme is the scheme of the API groups numapref's processes read and write through
// controller-runtime, and no other (client-go's scheme has every group of Kubernetes, and
// each costs the agent memory on every node):
//   - core/v1: pods, the Node, Events (the agent's controller, the signer's Node checks);
//   - apps/v1: the agent's own DaemonSet (the drain on uninstall);
//   - coordination/v1 and events/v1: the summarizer's lease and the Events about it, and
//     events.k8s.io Events;
//   - certificates/v1: the CSRs the summarizer signs;
//   - resource.k8s.io/v1: the ResourceSlices and ResourceClaims FollowDevices reads;
//   - numa.numapref.io: NumaPreferences and NumaNodeReports.
//
// TokenReviews, SubjectAccessReviews and the agent's own CSRs go through typed clients
// (reviewClients), which need no scheme of ours.
func newScheme() (*runtime.Scheme, error) {
	scheme := runtime.NewScheme()
	err := errors.Join(corev1.AddToScheme(scheme), appsv1.AddToScheme(scheme), coordinationv1.AddToScheme(scheme),
		eventsv1.AddToScheme(scheme), certificatesv1.AddToScheme(scheme), resourcev1.AddToScheme(scheme),
		numav1.AddToScheme(scheme))
	if err != nil {
		return nil, fmt.Errorf("making the API scheme: %w", err)
	}
	return scheme, nil
}

// reviewClients are the agent's typed clients beside controller-runtime's, of the groups
// it uses and no other: kubernetes.NewForConfig would link every group's client into the
// binary. The serving certificate's client (agentcert.NodeCertificateClient) is one.
type reviewClients struct {
	core           *corev1client.CoreV1Client
	certificates   *certificatesv1client.CertificatesV1Client
	authentication *authenticationv1client.AuthenticationV1Client
	authorization  *authorizationv1client.AuthorizationV1Client
	discovery      *discovery.DiscoveryClient
}

// newReviewClients makes them as kubernetes.NewForConfigAndClient makes its clients: one
// rate limiter (the config's QPS and Burst) shared by all.
func newReviewClients(config *rest.Config, httpClient *http.Client) (*reviewClients, error) {
	cfg := *config
	if cfg.RateLimiter == nil && cfg.QPS > 0 {
		if cfg.Burst <= 0 {
			return nil, errors.New("making the API clients: a QPS needs a Burst greater than 0")
		}
		cfg.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(cfg.QPS, cfg.Burst)
	}
	var c reviewClients
	var errs [5]error
	c.core, errs[0] = corev1client.NewForConfigAndClient(&cfg, httpClient)
	c.certificates, errs[1] = certificatesv1client.NewForConfigAndClient(&cfg, httpClient)
	c.authentication, errs[2] = authenticationv1client.NewForConfigAndClient(&cfg, httpClient)
	c.authorization, errs[3] = authorizationv1client.NewForConfigAndClient(&cfg, httpClient)
	c.discovery, errs[4] = discovery.NewDiscoveryClientForConfigAndClient(&cfg, httpClient)
	if err := errors.Join(errs[:]...); err != nil {
		return nil, fmt.Errorf("making the API clients: %w", err)
	}
	return &c, nil
}

func (c *reviewClients) CoreV1() corev1client.CoreV1Interface { return c.core }

func (c *reviewClients) CertificatesV1() certificatesv1client.CertificatesV1Interface {
	return c.certificates
}
