// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/numapref/numapref/internal/inspect"
)

// agentTokenSeconds is the life of a token made for the agent: the API server's minimum.
const agentTokenSeconds = 600

// agentToken returns a token bound to the agent's audience (inspect.Audience), which is
// the only kind the agent accepts for inspect, and says where it came from. The API server
// issues tokens of another audience to service accounts only (TokenRequest), so:
//
//  1. --token-service-account <ns>/<name>: a token of that service account (the caller
//     needs create on serviceaccounts/token for it). This is the way for users who are no
//     service account: OIDC, client certificates, static tokens.
//  2. a kubeconfig token that is already bound to the audience (kubectl create token
//     <sa> --audience numapref-agent): as it is.
//  3. a kubeconfig user that is a service account (SelfSubjectReview says who): a token
//     of that same service account (it needs create on its own serviceaccounts/token).
//
// Otherwise no token is sent: the kubeconfig's own would be refused and would only hand
// a credential for the API server to the agent.
func agentToken(ctx context.Context, cfg *rest.Config, cs kubernetes.Interface, serviceAccount string) (token, source string, err error) {
	if serviceAccount != "" {
		ns, name, err := splitServiceAccount(serviceAccount)
		if err != nil {
			return "", "", err
		}
		return mintToken(ctx, cs, ns, name, "--token-service-account")
	}
	if own, err := kubeconfigToken(cfg); err != nil {
		return "", "", err
	} else if slices.Contains(jwtAudiences(own), inspect.Audience) {
		return own, "the kubeconfig's token (audience " + inspect.Audience + ")", nil
	}
	review, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return "", "", fmt.Errorf("asking the API server who you are (SelfSubjectReview), to get a token for the agent: %w", err)
	}
	user := review.Status.UserInfo.Username
	if rest, ok := strings.CutPrefix(user, "system:serviceaccount:"); ok {
		if ns, name, ok := strings.Cut(rest, ":"); ok {
			return mintToken(ctx, cs, ns, name, "your own service account")
		}
	}
	return "", "", fmt.Errorf("the agent accepts only tokens for the audience %q, which the API server issues to service accounts only; "+
		"you are %q, not a service account: pass --token-service-account <namespace>/<name> of a service account you may create tokens for "+
		"(create on serviceaccounts/token) and that may inspect, or use a kubeconfig whose token has that audience "+
		"(kubectl create token <sa> --audience %s). Your own token is not sent", inspect.Audience, user, inspect.Audience)
}

// mintToken asks for a token of service account ns/name bound to the agent's audience.
func mintToken(ctx context.Context, cs kubernetes.Interface, ns, name, why string) (string, string, error) {
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		Audiences: []string{inspect.Audience}, ExpirationSeconds: ptr.To[int64](agentTokenSeconds),
	}}, metav1.CreateOptions{})
	switch {
	case apierrors.IsForbidden(err):
		return "", "", fmt.Errorf("getting a token for the agent (audience %s) for service account %s/%s (%s): %w; "+
			"it takes create on serviceaccounts/token with resourceNames [%s] in namespace %s (see SECURITY.md)", inspect.Audience, ns, name, why, err, name, ns)
	case err != nil:
		return "", "", fmt.Errorf("getting a token for the agent (audience %s) for service account %s/%s (%s): %w", inspect.Audience, ns, name, why, err)
	case tr.Status.Token == "":
		return "", "", fmt.Errorf("the API server returned no token for service account %s/%s", ns, name)
	}
	return tr.Status.Token, fmt.Sprintf("service account %s/%s (%s), audience %s", ns, name, why, inspect.Audience), nil
}

func splitServiceAccount(s string) (string, string, error) {
	ns, name, ok := strings.Cut(s, "/")
	if !ok || len(validation.IsDNS1123Label(ns)) > 0 || len(validation.IsDNS1123Subdomain(name)) > 0 {
		return "", "", usageError("--token-service-account %q: want <namespace>/<name>", s)
	}
	return ns, name, nil
}

// kubeconfigToken is the kubeconfig user's static token (token or tokenFile), if any.
// Tokens of exec and auth-provider plugins are not looked at: they are the API server's.
func kubeconfigToken(cfg *rest.Config) (string, error) {
	if cfg.BearerToken != "" {
		return cfg.BearerToken, nil
	}
	if cfg.BearerTokenFile == "" {
		return "", nil
	}
	b, err := os.ReadFile(cfg.BearerTokenFile)
	if err != nil {
		return "", fmt.Errorf("reading the kubeconfig's token file: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// jwtAudiences reads the aud claim of a JWT without verifying it (the agent's TokenReview
// does): it only decides whether the token is worth sending. Not a JWT: none.
func jwtAudiences(token string) []string {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return nil
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return nil
	}
	var claims struct {
		Aud json.RawMessage `json:"aud"`
	}
	if json.Unmarshal(payload, &claims) != nil || len(claims.Aud) == 0 {
		return nil
	}
	var one string
	if json.Unmarshal(claims.Aud, &one) == nil && one != "" {
		return []string{one}
	}
	var many []string
	if json.Unmarshal(claims.Aud, &many) == nil {
		return many
	}
	return nil
}
