// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package agentcert

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"maps"
	"math/big"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// CASecret is where the signer keeps its CA: a kubernetes.io/tls Secret of its own
// namespace, which only the signer's ServiceAccount may read (the chart's signer Role). The
// signer makes the CA there at its first start; its key is never written anywhere else, so
// no Helm release, values file or rendered manifest holds it.
type CASecret struct {
	Namespace, Name string
	// Validity of a CA made here (default 10 years).
	Validity time.Duration
	// Owners of the Secret, for the garbage collector: the signer's ServiceAccount, so that
	// the CA goes with the release.
	Owners []metav1.OwnerReference
}

// Ensure returns the CA held in the Secret, made and stored first if there is none. Two
// signers starting at once agree: the one whose create fails reads the other's.
func (s CASecret) Ensure(ctx context.Context, c client.Client, now time.Time) (certPEM, keyPEM []byte, err error) {
	for range 2 {
		var sec corev1.Secret
		err := c.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: s.Name}, &sec)
		if err == nil {
			certPEM, keyPEM = sec.Data[corev1.TLSCertKey], sec.Data[corev1.TLSPrivateKeyKey]
			ca, err := parseSignerCA(certPEM, keyPEM)
			if err != nil {
				return nil, nil, fmt.Errorf("the CA in Secret %s/%s (delete it to have a new one made): %w", s.Namespace, s.Name, err)
			}
			if !now.Before(ca.cert.NotAfter) {
				return nil, nil, fmt.Errorf("the CA in Secret %s/%s expired at %s (delete it to have a new one made)", s.Namespace, s.Name, ca.cert.NotAfter)
			}
			return certPEM, keyPEM, nil
		}
		if !apierrors.IsNotFound(err) {
			return nil, nil, fmt.Errorf("reading the CA Secret %s/%s: %w", s.Namespace, s.Name, err)
		}
		validity := s.Validity
		if validity <= 0 {
			validity = 10 * 365 * 24 * time.Hour
		}
		if certPEM, keyPEM, err = makeCA(now, validity); err != nil {
			return nil, nil, err
		}
		sec = corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: s.Name, OwnerReferences: s.Owners,
				Labels: map[string]string{"app.kubernetes.io/managed-by": "numapref-signer"}},
			Type: corev1.SecretTypeTLS,
			Data: map[string][]byte{corev1.TLSCertKey: certPEM, corev1.TLSPrivateKeyKey: keyPEM},
		}
		err = c.Create(ctx, &sec)
		if err == nil {
			return certPEM, keyPEM, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return nil, nil, fmt.Errorf("storing the new CA in Secret %s/%s: %w", s.Namespace, s.Name, err)
		}
	}
	return nil, nil, fmt.Errorf("the CA Secret %s/%s was made and deleted while the signer read it", s.Namespace, s.Name)
}

// makeCA makes a CA: an ECDSA P-256 key and a self-signed certificate that may sign
// certificates and nothing else, valid from 5 minutes before now (clock skew).
func makeCA(now time.Time, validity time.Duration) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("making the CA's key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, nil, fmt.Errorf("drawing a serial number: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: "numapref-agent-ca"},
		NotBefore: now.Add(-5 * time.Minute), NotAfter: now.Add(validity),
		IsCA: true, BasicConstraintsValid: true, MaxPathLenZero: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, nil, fmt.Errorf("making the CA's certificate: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("encoding the CA's key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), nil
}

// CAPublisher keeps the CA certificate in the ConfigMap every authenticated user may read
// (inspect.CAConfigMap), which kubectl numapref and the PodMonitor verify the agents with,
// beside how to verify them (Data's other keys). The CA comes from CACert or, when that is
// empty, from key ca.crt of the Secret FromSecret (cert-manager's, which holds its CA
// there). It writes the ConfigMap at start and again whenever it differs, checked every
// Interval: a helm upgrade from a release that rendered the ConfigMap itself deletes it
// after the new release is up, and it is back within Interval.
type CAPublisher struct {
	Client          client.Client // reads and writes directly: the signer caches no ConfigMap
	Namespace, Name string
	CACert          []byte
	FromSecret      string
	Data            map[string]string
	Owners          []metav1.OwnerReference
	Interval        time.Duration // default 30s
	Log             logr.Logger
	Clock           clock.Clock

	published atomic.Bool
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: the signer runs alone.
func (*CAPublisher) NeedLeaderElection() bool { return false }

// Ready is a healthz.Checker: an error until the CA is first published, so that a helm
// install --wait returns once clients can verify the agents.
func (p *CAPublisher) Ready(*http.Request) error {
	if !p.published.Load() {
		return errors.New("the agents' CA is not published yet")
	}
	return nil
}

// Start publishes until ctx is done.
func (p *CAPublisher) Start(ctx context.Context) error {
	interval, clk := p.Interval, p.Clock
	if interval <= 0 {
		interval = 30 * time.Second
	}
	if clk == nil {
		clk = clock.RealClock{}
	}
	for {
		if err := p.publish(ctx); err != nil {
			if ctx.Err() == nil {
				p.Log.Error(err, "Publishing the agents' CA; retrying", "in", interval)
			}
		} else {
			p.published.Store(true)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-clk.After(interval):
		}
	}
}

// publish writes the ConfigMap once, if it differs from what it should hold.
func (p *CAPublisher) publish(ctx context.Context) error {
	ca := p.CACert
	if len(ca) == 0 {
		var sec corev1.Secret
		if err := p.Client.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: p.FromSecret}, &sec); err != nil {
			return fmt.Errorf("reading the CA from Secret %s/%s: %w", p.Namespace, p.FromSecret, err)
		}
		if ca = sec.Data["ca.crt"]; len(ca) == 0 || !bytes.Contains(ca, []byte("CERTIFICATE")) {
			return fmt.Errorf("secret %s/%s holds no PEM ca.crt yet", p.Namespace, p.FromSecret)
		}
	}
	want := map[string]string{"ca.crt": string(ca)}
	maps.Copy(want, p.Data)
	var cm corev1.ConfigMap
	err := p.Client.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: p.Name}, &cm)
	if apierrors.IsNotFound(err) {
		cm = corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name, OwnerReferences: p.Owners,
			Labels: map[string]string{"app.kubernetes.io/managed-by": "numapref-signer"}}, Data: want}
		if err := p.Client.Create(ctx, &cm); err != nil {
			return fmt.Errorf("creating ConfigMap %s/%s: %w", p.Namespace, p.Name, err)
		}
		p.Log.Info("Published the agents' CA", "configMap", p.Namespace+"/"+p.Name)
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading ConfigMap %s/%s: %w", p.Namespace, p.Name, err)
	}
	if maps.Equal(cm.Data, want) {
		return nil
	}
	cm.Data = want
	if err := p.Client.Update(ctx, &cm); err != nil {
		return fmt.Errorf("updating ConfigMap %s/%s: %w", p.Namespace, p.Name, err)
	}
	p.Log.Info("Published the agents' CA", "configMap", p.Namespace+"/"+p.Name)
	return nil
}

// OwnedBy is an owner reference to the ServiceAccount namespace/name, read through c.
func OwnedBy(ctx context.Context, c client.Client, namespace, name string) ([]metav1.OwnerReference, error) {
	if name == "" {
		return nil, nil
	}
	var sa corev1.ServiceAccount
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &sa); err != nil {
		return nil, fmt.Errorf("reading ServiceAccount %s/%s, the owner of what the signer writes: %w", namespace, name, err)
	}
	if sa.UID == "" {
		return nil, errors.New("the owner ServiceAccount has no UID")
	}
	return []metav1.OwnerReference{{APIVersion: "v1", Kind: "ServiceAccount", Name: sa.Name, UID: sa.UID}}, nil
}
