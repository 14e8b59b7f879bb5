// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package agentcert

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// AgentAudience is the audience of the tokens the agents' port takes for inspect, and for
// /metrics always (internal/serving): the API server accepts no such token.
const AgentAudience = "numapref-agent"

// ScraperToken keeps, in a Secret, a fresh token of the ServiceAccount that Prometheus
// scrapes the agents with (the PodMonitor names the Secret: the Prometheus Operator reads
// a scrape's credentials from a Secret only). Each token is bound to AgentAudience, which
// the API server refuses, and expires after Lifetime; a new one replaces it at half its
// life. A token read from the Secret, or from a Prometheus' memory, is worth nothing against
// the API server and nothing anywhere after Lifetime, where a service account token Secret
// would be both, for ever.
type ScraperToken struct {
	Client                    client.Client
	Namespace, ServiceAccount string
	Secret                    string
	Lifetime                  time.Duration // default 1h (the API's least is 10 minutes)
	Owners                    []metav1.OwnerReference
	Log                       logr.Logger
	Clock                     clock.Clock
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: the signer runs alone.
func (*ScraperToken) NeedLeaderElection() bool { return false }

// Start renews the token until ctx is done.
func (t *ScraperToken) Start(ctx context.Context) error {
	clk := t.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	lifetime := t.Lifetime
	if lifetime <= 0 {
		lifetime = time.Hour
	}
	for {
		var wait time.Duration
		expires, err := t.renew(ctx, lifetime)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			wait = 30 * time.Second
			t.Log.Error(err, "Renewing the scraper's token; retrying", "in", wait)
		} else {
			wait = expires.Sub(clk.Now()) / 2
			t.Log.V(1).Info("Renewed the scraper's token", "secret", t.Namespace+"/"+t.Secret, "expires", expires)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-clk.After(max(wait, time.Second)):
		}
	}
}

// renew asks for a token and writes it into the Secret; it returns when the token expires.
func (t *ScraperToken) renew(ctx context.Context, lifetime time.Duration) (time.Time, error) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: t.Namespace, Name: t.ServiceAccount}}
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		Audiences: []string{AgentAudience}, ExpirationSeconds: ptr.To(int64(lifetime / time.Second)),
	}}
	if err := t.Client.SubResource("token").Create(ctx, sa, req); err != nil {
		return time.Time{}, fmt.Errorf("asking for a token of ServiceAccount %s/%s: %w", t.Namespace, t.ServiceAccount, err)
	}
	data := map[string][]byte{"token": []byte(req.Status.Token)}
	var sec corev1.Secret
	err := t.Client.Get(ctx, client.ObjectKey{Namespace: t.Namespace, Name: t.Secret}, &sec)
	switch {
	case apierrors.IsNotFound(err):
		sec = corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: t.Namespace, Name: t.Secret, OwnerReferences: t.Owners,
			Labels: map[string]string{"app.kubernetes.io/managed-by": "numapref-signer"}}, Type: corev1.SecretTypeOpaque, Data: data}
		err = t.Client.Create(ctx, &sec)
	case err == nil:
		sec.Data = data
		err = t.Client.Update(ctx, &sec)
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("writing the scraper's token into Secret %s/%s: %w", t.Namespace, t.Secret, err)
	}
	return req.Status.ExpirationTimestamp.Time, nil
}
