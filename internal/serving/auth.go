// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package serving

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"

	"github.com/numapref/numapref/internal/inspect"
)

// AgentAudience is the audience a token must be bound to for the inspect endpoint (and for
// /metrics when the agent is told so): kubectl numapref asks the API server for a token of
// this audience (TokenRequest), which the API server itself does not accept, so the agent
// cannot replay what it receives.
const AgentAudience = inspect.Audience

// APIServerAudience, in Route.Audiences, stands for the API server's own audiences: the
// token is reviewed without spec.audiences. A pod's default service account token (a
// Prometheus pod's) and a kubeconfig's token carry them.
const APIServerAudience = ""

// TokenReviewer creates TokenReviews (the typed client's TokenReviews()).
type TokenReviewer interface {
	Create(ctx context.Context, review *authenticationv1.TokenReview, opts metav1.CreateOptions) (*authenticationv1.TokenReview, error)
}

// AccessReviewer creates SubjectAccessReviews (the typed client's SubjectAccessReviews()).
type AccessReviewer interface {
	Create(ctx context.Context, review *authorizationv1.SubjectAccessReview, opts metav1.CreateOptions) (*authorizationv1.SubjectAccessReview, error)
}

// User is an authenticated caller, as the API server's TokenReview named it.
type User struct {
	Name   string
	UID    string
	Groups []string
	Extra  map[string]authorizationv1.ExtraValue
	// Audience is the audience its token was accepted for; APIServerAudience for the API
	// server's own.
	Audience string
}

type userKey struct{}

// UserFrom returns the caller of a request the server let through.
func UserFrom(ctx context.Context) (*User, bool) {
	u, ok := ctx.Value(userKey{}).(*User)
	return u, ok && u != nil
}

func withUser(ctx context.Context, u *User) context.Context {
	return context.WithValue(ctx, userKey{}, u)
}

// CacheTTLs say how long review answers are reused. A revoked token or binding takes
// effect on the agent after at most the positive TTL.
type CacheTTLs struct {
	Authenticated, Unauthenticated time.Duration
	Allowed, Denied                time.Duration
}

// DefaultCacheTTLs: a scrape every 15-30 s costs one TokenReview and one
// SubjectAccessReview a minute per node.
func DefaultCacheTTLs() CacheTTLs {
	return CacheTTLs{Authenticated: time.Minute, Unauthenticated: 10 * time.Second, Allowed: time.Minute, Denied: 10 * time.Second}
}

// AuthOptions configure an Auth.
type AuthOptions struct {
	Tokens TokenReviewer
	Access AccessReviewer
	TTLs   CacheTTLs
	// ReviewTimeout bounds each review; 0 means 10 s.
	ReviewTimeout time.Duration
	// Clock is the caches' and the rate limits' clock; nil means the real one.
	Clock clock.PassiveClock
	// Tokens are checked against Policy before any review; LearnTokenPolicy fills it.
	Policy TokenPolicy
	// ReviewRate bounds the reviews each client causes; zero means DefaultReviewRate.
	ReviewRate ReviewRate
}

// Auth authenticates tokens and authorizes their users against the API server, with
// caches. The server uses it for every request; handlers use it for their own checks
// (CanGetPod).
type Auth struct {
	tokens  TokenReviewer
	access  AccessReviewer
	ttls    CacheTTLs
	timeout time.Duration
	clock   clock.PassiveClock
	policy  TokenPolicy
	limiter *clientLimiter
	users   answerCache[*User]
	answers answerCache[decision]
}

type decision struct {
	allowed bool
	reason  string
}

// NewAuth makes an Auth; Tokens and Access are required.
func NewAuth(o AuthOptions) (*Auth, error) {
	if o.Tokens == nil || o.Access == nil {
		return nil, fmt.Errorf("serving: a TokenReviewer and an AccessReviewer are required")
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.ReviewTimeout == 0 {
		o.ReviewTimeout = 10 * time.Second
	}
	if o.ReviewRate == (ReviewRate{}) {
		o.ReviewRate = DefaultReviewRate()
	}
	if o.ReviewRate.PerSecond <= 0 || o.ReviewRate.Burst <= 0 {
		return nil, fmt.Errorf("serving: the review rate must be positive: %+v", o.ReviewRate)
	}
	return &Auth{
		tokens: o.Tokens, access: o.Access, ttls: o.TTLs, timeout: o.ReviewTimeout,
		clock: o.Clock, policy: o.Policy, limiter: newClientLimiter(o.Clock, o.ReviewRate),
		users:   newAnswerCache[*User](o.Clock, maxCacheEntries),
		answers: newAnswerCache[decision](o.Clock, maxCacheEntries),
	}, nil
}

// maxCacheEntries bounds each cache (positive and negative answers apart): a flood of
// distinct tokens cannot grow the agent, and pushes out only the least recently used
// refusals.
const maxCacheEntries = 1024

// authenticate returns the user of token for the first of audiences the API server
// accepts it for; nil when it accepts it for none. An audience the token fails the local
// check for (TokenPolicy) is not reviewed. An error means the token could not be checked
// (the issuer's keys are unavailable) or a review could not be made
// (ErrReviewRateLimited: the client may not cause one now), so the answer is unknown.
func (a *Auth) authenticate(ctx context.Context, token string, audiences []string) (*User, error) {
	var failed error
	for _, aud := range audiences {
		if err := a.policy.check(ctx, token, aud, a.clock.Now()); err != nil {
			if !errors.Is(err, errJunkToken) {
				failed = err
			}
			continue
		}
		u, err := a.review(ctx, token, aud)
		switch {
		case err != nil:
			failed = err
		case u != nil:
			return u, nil
		}
	}
	return nil, failed
}

func (a *Auth) review(ctx context.Context, token, audience string) (*User, error) {
	sum := sha256.Sum256([]byte(token))
	key := audience + "\x00" + hex.EncodeToString(sum[:])
	if u, ok := a.users.get(key); ok {
		return u, nil
	}
	if !a.limiter.allow(clientFrom(ctx)) {
		return nil, ErrReviewRateLimited
	}
	tr := &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}
	if audience != APIServerAudience {
		tr.Spec.Audiences = []string{audience}
	}
	ctx, cancel := context.WithTimeout(ctx, a.timeout)
	defer cancel()
	res, err := a.tokens.Create(ctx, tr, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("reviewing a token (TokenReview): %w", err)
	}
	st := res.Status
	// The API server answers with the requested audiences the token is valid for; a token
	// that is valid but not for this audience is not authenticated here.
	if !st.Authenticated || audience != APIServerAudience && !slices.Contains(st.Audiences, audience) {
		a.users.put(key, nil, false, a.ttls.Unauthenticated)
		return nil, nil
	}
	u := &User{Name: st.User.Username, UID: st.User.UID, Groups: st.User.Groups, Audience: audience}
	if len(st.User.Extra) > 0 {
		u.Extra = map[string]authorizationv1.ExtraValue{}
		for k, v := range st.User.Extra {
			u.Extra[k] = authorizationv1.ExtraValue(v)
		}
	}
	a.users.put(key, u, true, a.ttls.Authenticated)
	return u, nil
}

// authorize asks whether u may do what attrs (exactly one of them set) describe.
func (a *Auth) authorize(ctx context.Context, u *User, nonResource *authorizationv1.NonResourceAttributes, resource *authorizationv1.ResourceAttributes) (decision, error) {
	spec := authorizationv1.SubjectAccessReviewSpec{
		User: u.Name, UID: u.UID, Groups: u.Groups, Extra: u.Extra,
		NonResourceAttributes: nonResource, ResourceAttributes: resource,
	}
	raw, err := json.Marshal(spec)
	if err != nil {
		return decision{}, fmt.Errorf("encoding an access review: %w", err)
	}
	sum := sha256.Sum256(raw)
	key := hex.EncodeToString(sum[:])
	if d, ok := a.answers.get(key); ok {
		return d, nil
	}
	if !a.limiter.allow(clientFrom(ctx)) {
		return decision{}, ErrReviewRateLimited
	}
	ctx, cancel := context.WithTimeout(ctx, a.timeout)
	defer cancel()
	res, err := a.access.Create(ctx, &authorizationv1.SubjectAccessReview{Spec: spec}, metav1.CreateOptions{})
	if err != nil {
		return decision{}, fmt.Errorf("reviewing access (SubjectAccessReview): %w", err)
	}
	d := decision{allowed: res.Status.Allowed && !res.Status.Denied, reason: res.Status.Reason}
	ttl := a.ttls.Denied
	if d.allowed {
		ttl = a.ttls.Allowed
	}
	a.answers.put(key, d, d.allowed, ttl)
	return d, nil
}

// CanGetPod reports whether the caller of ctx (a request the server let through) may get
// pod namespace/name: a SubjectAccessReview of get on pods, named, in the namespace, so a
// Role of that namespace (or resourceNames) decides. Without a caller it is false.
func (a *Auth) CanGetPod(ctx context.Context, namespace, name string) (bool, string, error) {
	u, ok := UserFrom(ctx)
	if !ok {
		return false, "no authenticated caller", nil
	}
	d, err := a.authorize(ctx, u, nil, &authorizationv1.ResourceAttributes{
		Namespace: namespace, Verb: "get", Resource: "pods", Name: name,
	})
	if err != nil {
		return false, "", err
	}
	reason := d.reason
	if !d.allowed {
		reason = fmt.Sprintf("user %s may not get pods in namespace %s", u.Name, namespace)
	}
	return d.allowed, reason, nil
}
