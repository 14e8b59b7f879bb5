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
	"strings"
	"time"

	"k8s.io/client-go/rest"

	"github.com/numapref/numapref/internal/inspect"
)

// tlsOptions say how the agent's serving certificate is checked.
type tlsOptions struct {
	insecure   bool
	caFile     string
	serverName string
}

// maxAnswer bounds what is read from the agent.
const maxAnswer = 16 << 20

// agentClient makes an HTTP client that authenticates to the agent as the kubeconfig user
// does to the API server, with a bearer token: a static token, a token file (re-read as
// it rotates), or one from an exec or auth-provider plugin. The agent only reviews tokens
// (TokenReview): client certificates and basic auth are not sent, nor is impersonation
// (the agent would ignore it and authorize the real user). The API server's CA is not
// trusted for the agent, which has its own certificate.
func agentClient(user *rest.Config, t tlsOptions, timeout time.Duration) (*http.Client, error) {
	if user.BearerToken == "" && user.BearerTokenFile == "" && user.ExecProvider == nil && user.AuthProvider == nil {
		return nil, errors.New("the kubeconfig user has no bearer token (nor a token plugin): the agent authenticates tokens only; " +
			"client certificates are not accepted (use a service account token or an OIDC user)")
	}
	c := rest.CopyConfig(user)
	c.TLSClientConfig = rest.TLSClientConfig{Insecure: t.insecure, CAFile: t.caFile, ServerName: t.serverName}
	c.Username, c.Password = "", ""
	c.Impersonate = rest.ImpersonationConfig{}
	c.Timeout = timeout
	hc, err := rest.HTTPClientFor(c)
	if err != nil {
		return nil, fmt.Errorf("making the agent's HTTP client: %w", err)
	}
	return hc, nil
}

// fetchInspection asks the agent at base for pod namespace/name.
func fetchInspection(ctx context.Context, c *http.Client, base, namespace, name string) (*inspect.Pod, error) {
	u := strings.TrimSuffix(base, "/") + inspect.Path(namespace, name)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("asking the agent: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return nil, fmt.Errorf("asking the agent at %s: %w%s", base, err, tlsHint(err))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return nil, fmt.Errorf("reading the agent's answer from %s: %w", base, err)
	}
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
		return nil, fmt.Errorf("the agent at %s did not accept your token (401 %s): it reviews bearer tokens with the API server (TokenReview)",
			base, strings.TrimSpace(string(body)))
	case http.StatusInternalServerError:
		if strings.TrimSpace(string(body)) == "Authentication failed" {
			// controller-runtime's filter answers 500, not 401, when the TokenReview itself
			// reports an error, which is what the API server does for an invalid token.
			return nil, fmt.Errorf("the agent at %s could not authenticate your token (500 Authentication failed): "+
				"the TokenReview failed; the token is invalid or expired, or the agent cannot reach the API server", base)
		}
	case http.StatusForbidden:
		return nil, fmt.Errorf("the agent at %s refused (403 %s): you need get on the non-resource URL %s; "+
			"bind the ClusterRole <release>-numapref-inspect-reader (chart) or numapref-inspect-reader (config/rbac)",
			base, strings.TrimSpace(string(body)), inspect.Path(namespace, name))
	}
	var e inspect.Error
	if err := json.Unmarshal(body, &e); err == nil && e.Error != "" {
		return nil, fmt.Errorf("the agent at %s answered %d: %s", base, resp.StatusCode, e.Error)
	}
	return nil, fmt.Errorf("the agent at %s answered %s: %.512s", base, resp.Status, strings.TrimSpace(string(body)))
}

// tlsHint explains a certificate that could not be verified.
func tlsHint(err error) string {
	var (
		verify   *tls.CertificateVerificationError
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
	)
	if errors.As(err, &verify) || errors.As(err, &unknown) || errors.As(err, &hostname) {
		return " (the agent serves a self-signed certificate unless its operator installed one: pass --agent-ca-file, " +
			"and --tls-server-name if the certificate does not name the address, or accept the risk with --insecure-skip-tls-verify)"
	}
	return ""
}
