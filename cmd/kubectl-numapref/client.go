// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/numapref/numapref/internal/inspect"
)

// maxAnswer bounds what is read from the agent.
const maxAnswer = 16 << 20

// agentTrust says how the agent's serving certificate is verified.
type agentTrust struct {
	insecure   bool
	roots      *x509.CertPool
	serverName string // empty: the host of the agent URL
	from       string // where the CA comes from, for messages
	// perNode: every agent serves a certificate of its own node (inspect.VerifyNode), which
	// must name node, the node whose agent is dialled.
	perNode bool
	node    string
}

// resolveTrust picks the agent's CA: none with --insecure-skip-tls-verify, the file of
// --agent-ca-file, else the ConfigMap the chart publishes in the agent namespace
// (inspect.CAConfigMap), whose serverName is the name to verify: every agent serves the
// same certificate, for that name, whichever node IP the plugin dials. --tls-server-name
// overrides the name.
func resolveTrust(ctx context.Context, cs kubernetes.Interface, o *inspectOptions) (agentTrust, error) {
	if o.insecure {
		return agentTrust{insecure: true}, nil
	}
	var pem []byte
	t := agentTrust{serverName: o.serverName}
	if o.caFile != "" {
		b, err := os.ReadFile(o.caFile)
		if err != nil {
			return agentTrust{}, fmt.Errorf("reading --agent-ca-file: %w", err)
		}
		pem, t.from = b, o.caFile
	} else {
		cm, err := cs.CoreV1().ConfigMaps(o.agentNamespace).Get(ctx, inspect.CAConfigMap, metav1.GetOptions{})
		where := o.agentNamespace + "/" + inspect.CAConfigMap
		switch {
		case apierrors.IsNotFound(err):
			return agentTrust{}, fmt.Errorf("no ConfigMap %s, which publishes the CA of the agents' serving certificate (the chart makes it; "+
				"see --agent-namespace): pass --agent-ca-file and --tls-server-name, or accept the risk with --insecure-skip-tls-verify", where)
		case err != nil:
			return agentTrust{}, fmt.Errorf("reading the agents' CA from ConfigMap %s: %w", where, err)
		}
		pem, t.from = []byte(cm.Data[inspect.CAConfigMapCAKey]), "ConfigMap "+where
		if cm.Data[inspect.CAConfigMapVerifyKey] == inspect.VerifyNode {
			// Per-node certificates: the certificate must name the node of the pod
			// asked about (verifyNode), whatever address is dialled.
			t.perNode, t.node = true, o.node
		} else if t.serverName == "" {
			t.serverName = cm.Data[inspect.CAConfigMapNameKey]
		}
		if t.serverName == "" && !t.perNode {
			return agentTrust{}, fmt.Errorf("ConfigMap %s has no %s: the name the agents' certificate carries is unknown (or give --tls-server-name)", where, inspect.CAConfigMapNameKey)
		}
	}
	t.roots = x509.NewCertPool()
	if !t.roots.AppendCertsFromPEM(pem) {
		return agentTrust{}, fmt.Errorf("no PEM certificate in %s", t.from)
	}
	return t, nil
}

// agentClient makes the HTTP client for the agent: TLS verified as t says, through the
// kubeconfig's proxy (else the environment's). It carries no credential of the
// kubeconfig: fetchInspection sends the agent's own token.
func agentClient(cfg *rest.Config, t agentTrust, timeout time.Duration) *http.Client {
	proxy := cfg.Proxy
	if proxy == nil {
		proxy = http.ProxyFromEnvironment
	}
	conf := &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: t.roots, ServerName: t.serverName, InsecureSkipVerify: t.insecure}
	if t.perNode && !t.insecure {
		// verifyNode does the whole verification, for the node's name, not the address.
		conf.InsecureSkipVerify, conf.VerifyConnection = true, t.verifyNode
	}
	return &http.Client{Timeout: timeout, Transport: &http.Transport{
		Proxy:               proxy,
		TLSClientConfig:     conf,
		TLSHandshakeTimeout: timeout,
	}}
}

// verifyNode, with per-node certificates, verifies the agent's certificate chain to the
// CA and that it names the node of the pod asked about (a DNS SAN; the CA signs a node's
// name only for the agent bound to that node). The address dialled is not what proves
// the agent: the key of a certificate naming the node is. So an agent bound to loopback
// (--agent-url https://127.0.0.1:8443) verifies, and the agent of node A cannot answer
// for node B at any address, B's own included (A's address reused, a proxy).
func (t agentTrust) verifyNode(cs tls.ConnectionState) error {
	if t.node == "" {
		return errors.New("the node whose agent is dialled is unknown: its certificate cannot be checked")
	}
	if len(cs.PeerCertificates) == 0 {
		return errors.New("the agent sent no certificate")
	}
	leaf := cs.PeerCertificates[0]
	inter := x509.NewCertPool()
	for _, c := range cs.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: t.roots, Intermediates: inter}); err != nil {
		return fmt.Errorf("the agent's certificate is not signed by the CA of %s: %w", t.from, err)
	}
	if err := leaf.VerifyHostname(t.node); err != nil {
		return fmt.Errorf("the agent's certificate is not its node's: want node %s, it names %v (%s): %w", t.node, leaf.DNSNames, leaf.Subject.CommonName, err)
	}
	return nil
}

// fetchInspection asks the agent at base for pod namespace/name with token (whose origin
// is tokenSource, for messages).
func fetchInspection(ctx context.Context, c *http.Client, t agentTrust, base, token, tokenSource, namespace, name string) (*inspect.Pod, error) {
	u := strings.TrimSuffix(base, "/") + inspect.Path(namespace, name)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("asking the agent: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := c.Do(req)
	if err != nil {
		return nil, fmt.Errorf("asking the agent at %s: %w%s", base, err, tlsHint(err, t))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return nil, fmt.Errorf("reading the agent's answer from %s: %w", base, err)
	}
	var e inspect.Error
	isJSON := json.Unmarshal(body, &e) == nil && e.Error != ""
	text := strings.TrimSpace(string(body))
	switch resp.StatusCode {
	case http.StatusOK:
		var pod inspect.Pod
		if err := json.Unmarshal(body, &pod); err != nil {
			return nil, fmt.Errorf("decoding the agent's answer from %s: %w", base, err)
		}
		if pod.APIVersion != inspect.APIVersion {
			return nil, fmt.Errorf("the agent at %s answered schema %q; this plugin reads %q", base, pod.APIVersion, inspect.APIVersion)
		}
		return &pod, nil
	case http.StatusUnauthorized:
		return nil, fmt.Errorf("the agent at %s did not accept the token (401 %s): it takes valid tokens for the audience %s only, "+
			"reviewed with the API server (TokenReview); the token was %s", base, text, inspect.Audience, tokenSource)
	case http.StatusForbidden:
		if isJSON {
			// The handler's own check: get on the pod in its namespace.
			return nil, fmt.Errorf("the agent at %s refused (403): %s", base, e.Error)
		}
		return nil, fmt.Errorf("the agent at %s refused (403 %s): you need get on the non-resource URL %s; "+
			"bind the ClusterRole <release>-numapref-inspect-reader (chart) or numapref-inspect-reader (config/rbac)",
			base, text, inspect.Path(namespace, name))
	}
	if isJSON {
		return nil, fmt.Errorf("the agent at %s answered %d: %s", base, resp.StatusCode, e.Error)
	}
	return nil, fmt.Errorf("the agent at %s answered %s: %.512s", base, resp.Status, text)
}

// tlsHint explains a certificate that could not be verified.
func tlsHint(err error, t agentTrust) string {
	var (
		verify   *tls.CertificateVerificationError
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
	)
	if !errors.As(err, &verify) && !errors.As(err, &unknown) && !errors.As(err, &hostname) {
		return ""
	}
	if t.perNode {
		// verifyNode's own message says what failed: the CA or the node's name.
		return ""
	}
	name := t.serverName
	if name == "" {
		name = "the agent URL's host"
	}
	return fmt.Sprintf(" (the agent's certificate does not verify with the CA of %s for %s; an agent installed without the chart serves a "+
		"self-signed certificate: pass --agent-ca-file and --tls-server-name for its real one, or accept the risk with --insecure-skip-tls-verify)", t.from, name)
}
