// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package serving

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/google/go-cmp/cmp"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/numapref/numapref/internal/testutil/poll"
	"github.com/numapref/numapref/internal/testutil/testcerts"
)

// apiAudience is what the fake API server calls its own audience.
const apiAudience = "https://kubernetes.default.svc"

// fakeTokens reviews tokens the way the API server does: a token is valid for some
// audiences; a review without spec.audiences asks for the API server's. It does not
// check signatures: a token (tok) is known by its subject.
type fakeTokens struct {
	mu      sync.Mutex
	valid   map[string][]string // subject -> the audiences its tokens are valid for
	asked   [][]string          // spec.audiences of every review
	failing bool
}

func (f *fakeTokens) Create(_ context.Context, tr *authenticationv1.TokenReview, _ metav1.CreateOptions) (*authenticationv1.TokenReview, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, tr.Spec.Audiences)
	if f.failing {
		return nil, errors.New("connection refused")
	}
	want := tr.Spec.Audiences
	if len(want) == 0 {
		want = []string{apiAudience}
	}
	out := tr.DeepCopy()
	var both []string
	for _, a := range f.valid[subjectOf(tr.Spec.Token)] {
		if slices.Contains(want, a) {
			both = append(both, a)
		}
	}
	if len(both) == 0 {
		out.Status.Error = "token audiences are invalid for the target audiences"
		return out, nil
	}
	out.Status = authenticationv1.TokenReviewStatus{Authenticated: true, Audiences: both,
		User: authenticationv1.UserInfo{Username: "user-" + subjectOf(tr.Spec.Token), Groups: []string{"system:authenticated"}}}
	return out, nil
}

func (f *fakeTokens) reviews() [][]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.asked)
}

// fakeAccess allows exactly the listed non-resource paths (by user) and pods (by user,
// namespace).
type fakeAccess struct {
	mu    sync.Mutex
	paths map[string][]string // user -> paths
	pods  map[string][]string // user -> namespaces
	asked []authorizationv1.SubjectAccessReviewSpec
}

func (f *fakeAccess) Create(_ context.Context, r *authorizationv1.SubjectAccessReview, _ metav1.CreateOptions) (*authorizationv1.SubjectAccessReview, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, r.Spec)
	out := r.DeepCopy()
	switch s := r.Spec; {
	case s.NonResourceAttributes != nil:
		out.Status.Allowed = s.NonResourceAttributes.Verb == "get" && slices.Contains(f.paths[s.User], s.NonResourceAttributes.Path)
	case s.ResourceAttributes != nil:
		ra := s.ResourceAttributes
		out.Status.Allowed = ra.Verb == "get" && ra.Resource == "pods" && ra.Group == "" && slices.Contains(f.pods[s.User], ra.Namespace)
	}
	return out, nil
}

// startServer runs a server with routes on 127.0.0.1 and returns its address.
func startServer(t *testing.T, o Options) string {
	t.Helper()
	o.BindAddress = "127.0.0.1:0"
	if o.Log.GetSink() == nil {
		o.Log = testr.New(t)
	}
	if o.Limits == (Limits{}) {
		o.Limits = DefaultLimits()
	}
	s, err := NewServer(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("server: %v", err)
		}
	})
	eventually(t, "the server listens", func() error {
		if s.Addr() == "" {
			return errors.New("no address yet")
		}
		return nil
	})
	return s.Addr()
}

func eventually(t *testing.T, what string, f func() error) {
	t.Helper()
	poll.NoError(t, 30*time.Second, what, f)
}

func ok(w http.ResponseWriter, r *http.Request) {
	u, _ := UserFrom(r.Context())
	fmt.Fprintf(w, "hello %s via %q", u.Name, u.Audience)
}

func newAuth(t *testing.T, tokens *fakeTokens, access *fakeAccess) *Auth {
	t.Helper()
	a, err := NewAuth(AuthOptions{Tokens: tokens, Access: access, TTLs: DefaultCacheTTLs(), Policy: testPolicy})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestServesTheCertificateDirAndItsRotation: the certificate of CertDir is served and
// verifies with its CA under the service name, and a rotation laid out as kubelet updates
// a Secret volume is served without a restart.
func TestServesTheCertificateDirAndItsRotation(t *testing.T) {
	const name = "np-numapref-agent.numapref-system.svc"
	ca := testcerts.NewCA(t, "agent-ca")
	dir := t.TempDir()
	first := ca.Issue(t, []string{name}, nil)
	testcerts.WriteSecretDir(t, dir, first)
	addr := startServer(t, Options{CertDir: dir, Auth: newAuth(t, &fakeTokens{}, &fakeAccess{}),
		Routes: []Route{{Path: "/metrics", Handler: http.HandlerFunc(ok), Audiences: []string{APIServerAudience}}}})

	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca.PEM)
	served := func() (string, error) {
		c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: roots, ServerName: name})
		if err != nil {
			return "", err
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].SerialNumber.String(), nil
	}
	got, err := served()
	if err != nil {
		t.Fatalf("the certificate does not verify with its CA as %s: %v", name, err)
	}
	if got != first.Serial.String() {
		t.Fatalf("served serial %s, want the certificate dir's %s", got, first.Serial)
	}
	// A name the certificate does not carry fails, as an impostor's would.
	if _, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: roots, ServerName: "other.invalid"}); err == nil {
		t.Error("the certificate verified for a name it does not carry")
	}

	second := ca.Issue(t, []string{name}, nil)
	testcerts.WriteSecretDir(t, dir, second)
	eventually(t, "the rotated certificate is served", func() error {
		got, err := served()
		if err != nil {
			return err
		}
		if got != second.Serial.String() {
			return fmt.Errorf("serial %s, want %s", got, second.Serial)
		}
		return nil
	})
}

// A certificate dir without a key pair is an error at start, never a quiet self-signed
// fallback (which controller-runtime's metrics server does).
func TestMissingCertificateFailsTheStart(t *testing.T) {
	auth := newAuth(t, &fakeTokens{}, &fakeAccess{})
	_, err := NewServer(Options{BindAddress: "127.0.0.1:0", CertDir: filepath.Join(t.TempDir(), "nothing"), Auth: auth, Limits: DefaultLimits()})
	if err == nil || !strings.Contains(err.Error(), "loading the serving certificate") {
		t.Fatalf("NewServer = %v, want the missing certificate reported", err)
	}
}

// client trusts any certificate: these tests are about what happens after TLS.
func insecureClient() *http.Client {
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
}

func get(t *testing.T, c *http.Client, url, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(body))
}

// TestAudiences: the agent's routes. /inspect/ takes only tokens bound to numapref-agent
// (the review asks for that audience and nothing else); /metrics takes those and the API
// server's own, or only the former when told so.
func TestAudiences(t *testing.T) {
	tokens := &fakeTokens{valid: map[string][]string{
		"agent": {AgentAudience},
		"api":   {apiAudience},
		"other": {"vault"},
	}}
	access := &fakeAccess{paths: map[string][]string{
		"user-agent": {"/inspect/a/p", "/metrics"},
		"user-api":   {"/inspect/a/p", "/metrics"},
		"user-other": {"/inspect/a/p", "/metrics"},
	}}
	addr := startServer(t, Options{Auth: newAuth(t, tokens, access),
		Routes: AgentRoutes(http.HandlerFunc(ok), "/inspect/", http.HandlerFunc(ok), false)})
	base := "https://" + addr
	tests := map[string]struct {
		path, token string
		status      int
		body        string
	}{
		"inspect, agent token":        {path: "/inspect/a/p", token: tok("agent", AgentAudience), status: 200, body: `hello user-agent via "numapref-agent"`},
		"inspect, API server token":   {path: "/inspect/a/p", token: tok("api", apiAudience), status: 401, body: "audience numapref-agent"},
		"inspect, other audience":     {path: "/inspect/a/p", token: tok("other", "vault"), status: 401},
		"inspect, unknown token":      {path: "/inspect/a/p", token: tok("bogus", AgentAudience, apiAudience), status: 401},
		"inspect, no token":           {path: "/inspect/a/p", status: 401},
		"metrics, agent token":        {path: "/metrics", token: tok("agent", AgentAudience), status: 200, body: `hello user-agent via "numapref-agent"`},
		"metrics, API server token":   {path: "/metrics", token: tok("api", apiAudience), status: 200, body: `hello user-api via ""`},
		"metrics, other audience":     {path: "/metrics", token: tok("other", "vault"), status: 401, body: "audience numapref-agent or the API server"},
		"unknown path, agent token":   {path: "/debug/pprof/", token: tok("agent", AgentAudience), status: 404},
		"inspect, path not permitted": {path: "/inspect/b/p", token: tok("agent", AgentAudience), status: 403, body: "Authorization denied for user user-agent"},
	}
	c := insecureClient()
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			status, body := get(t, c, base+tc.path, tc.token)
			if status != tc.status || !strings.Contains(body, tc.body) {
				t.Errorf("GET %s: %d %q; want %d containing %q", tc.path, status, body, tc.status, tc.body)
			}
		})
	}
	// The inspect route never asked for the API server's audiences.
	tokens.mu.Lock()
	tokens.asked = nil
	tokens.mu.Unlock()
	get(t, c, base+"/inspect/a/q", tok("fresh", AgentAudience, apiAudience))
	if diff := cmp.Diff([][]string{{AgentAudience}}, tokens.reviews()); diff != "" {
		t.Errorf("TokenReview spec.audiences for inspect (-want +got):\n%s", diff)
	}

	strict := "https://" + startServer(t, Options{Auth: newAuth(t, tokens, access),
		Routes: AgentRoutes(http.HandlerFunc(ok), "/inspect/", http.HandlerFunc(ok), true)})
	if status, body := get(t, c, strict+"/metrics", tok("api", apiAudience)); status != http.StatusUnauthorized {
		t.Errorf("metrics for the agent audience only, API server token: %d %q, want 401", status, body)
	}
	if status, body := get(t, c, strict+"/metrics", tok("agent", AgentAudience)); status != http.StatusOK {
		t.Errorf("metrics for the agent audience only, agent token: %d %q, want 200", status, body)
	}
}

// A review that cannot be made is 503, not a verdict on the token; answers are cached.
func TestReviewOutageAndCache(t *testing.T) {
	tokens := &fakeTokens{valid: map[string][]string{"agent": {AgentAudience}}}
	access := &fakeAccess{paths: map[string][]string{"user-agent": {"/metrics"}}}
	addr := startServer(t, Options{Auth: newAuth(t, tokens, access), Routes: []Route{
		{Path: "/metrics", Handler: http.HandlerFunc(ok), Audiences: []string{AgentAudience}}}})
	c := insecureClient()
	// One token for the three requests: tok mints iat/exp from the clock, so a token per
	// request differs when a second passes between them (a slow machine), and is no cache hit.
	token := tok("agent", AgentAudience)
	for range 3 {
		if status, body := get(t, c, "https://"+addr+"/metrics", token); status != 200 {
			t.Fatalf("%d %s", status, body)
		}
	}
	if n := len(tokens.reviews()); n != 1 {
		t.Errorf("%d TokenReviews for 3 requests with one token, want 1 (cached)", n)
	}
	tokens.mu.Lock()
	tokens.failing = true
	tokens.mu.Unlock()
	if status, body := get(t, c, "https://"+addr+"/metrics", tok("new", AgentAudience)); status != http.StatusServiceUnavailable {
		t.Errorf("TokenReview failing: %d %q, want 503", status, body)
	}
}

// TestLimits: each limit answers before any review is made.
func TestLimits(t *testing.T) {
	tokens := &fakeTokens{valid: map[string][]string{"agent": {AgentAudience}}}
	access := &fakeAccess{paths: map[string][]string{"user-agent": {"/slow", "/block"}}}
	release := make(chan struct{})
	blocked := make(chan struct{}, 1)
	lim := Limits{
		// Read and write timeouts far above the header and idle ones, so each of those is
		// what hangs up below.
		ReadHeaderTimeout: 300 * time.Millisecond, ReadTimeout: 8 * time.Second, WriteTimeout: 9 * time.Second,
		IdleTimeout: 300 * time.Millisecond, MaxHeaderBytes: 4 << 10, MaxBodyBytes: 16,
		RequestTimeout: time.Second, MaxInFlight: 1,
	}
	addr := startServer(t, Options{Auth: newAuth(t, tokens, access), Limits: lim, Routes: []Route{
		{Path: "/slow", Audiences: []string{AgentAudience}, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			<-r.Context().Done() // longer than RequestTimeout
		})},
		{Path: "/block", Audiences: []string{AgentAudience}, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			blocked <- struct{}{}
			<-release
		})},
	}})
	base := "https://" + addr
	c := insecureClient()
	agentToken := tok("agent", AgentAudience) // one token: its review is cached
	do := func(method, path string, header http.Header, body string) (int, error) {
		req, err := http.NewRequest(method, base+path, strings.NewReader(body))
		if err != nil {
			return 0, err
		}
		req.Header = header
		if req.Header == nil {
			req.Header = http.Header{}
		}
		req.Header.Set("Authorization", "Bearer "+agentToken)
		resp, err := c.Do(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}

	t.Run("request timeout: 503", func(t *testing.T) {
		if status, err := do(http.MethodGet, "/slow", nil, ""); err != nil || status != http.StatusServiceUnavailable {
			t.Errorf("%d %v, want 503", status, err)
		}
	})
	t.Run("header too large: 431", func(t *testing.T) {
		if status, err := do(http.MethodGet, "/slow", http.Header{"X-Big": {strings.Repeat("a", 8<<10)}}, ""); err != nil || status != http.StatusRequestHeaderFieldsTooLarge {
			t.Errorf("%d %v, want 431", status, err)
		}
	})
	t.Run("body too large: 413", func(t *testing.T) {
		// A GET with a body: the method passes, the size does not.
		if status, err := do(http.MethodGet, "/slow", nil, strings.Repeat("x", 17)); err != nil || status != http.StatusRequestEntityTooLarge {
			t.Errorf("%d %v, want 413", status, err)
		}
	})
	t.Run("writes: 405", func(t *testing.T) {
		if status, err := do(http.MethodPost, "/slow", nil, ""); err != nil || status != http.StatusMethodNotAllowed {
			t.Errorf("%d %v, want 405", status, err)
		}
	})
	t.Run("in flight: 429", func(t *testing.T) {
		first := make(chan error, 1)
		go func() {
			_, err := do(http.MethodGet, "/block", nil, "")
			first <- err
		}()
		<-blocked
		status, err := do(http.MethodGet, "/block", nil, "")
		close(release)
		if err != nil || status != http.StatusTooManyRequests {
			t.Errorf("second request in flight: %d %v, want 429", status, err)
		}
		if err := <-first; err != nil {
			t.Error(err)
		}
	})
	// The connection-level timeouts: the server hangs up; the reads below block until it
	// does (or fail the test after the deadline set on the connection).
	dial := func(t *testing.T) *tls.Conn {
		c, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if err := c.SetDeadline(time.Now().Add(12 * time.Second)); err != nil {
			t.Fatal(err)
		}
		return c
	}
	t.Run("a header that never ends: closed", func(t *testing.T) {
		c := dial(t)
		start := time.Now()
		fmt.Fprintf(c, "GET /slow HTTP/1.1\r\nHost: x\r\n") // no end of header
		if _, err := io.ReadAll(c); err != nil && !errors.Is(err, io.EOF) && !isClosed(err) {
			t.Fatalf("reading: %v (the server did not hang up)", err)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("hung up after %s, want about the header timeout %s", d, lim.ReadHeaderTimeout)
		}
	})
	t.Run("an idle keep-alive connection: closed", func(t *testing.T) {
		c := dial(t)
		fmt.Fprintf(c, "GET /nothing HTTP/1.1\r\nHost: x\r\n\r\n")
		r := bufio.NewReader(c)
		resp, err := http.ReadResponse(r, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		start := time.Now()
		if _, err := r.ReadByte(); err == nil {
			t.Fatal("the server sent more on an idle connection")
		} else if !errors.Is(err, io.EOF) && !isClosed(err) {
			t.Fatalf("reading: %v (the server did not hang up)", err)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("hung up after %s, want about the idle timeout %s", d, lim.IdleTimeout)
		}
	})
	if n := len(tokens.reviews()); n != 1 {
		t.Errorf("%d TokenReviews, want 1 (every limit answers before a review; one token, cached)", n)
	}
}

func isClosed(err error) bool {
	var ne net.Error
	return errors.Is(err, net.ErrClosed) || strings.Contains(err.Error(), "connection reset") ||
		errors.As(err, &ne) && !ne.Timeout()
}

func TestLimitsValidate(t *testing.T) {
	l := DefaultLimits()
	if err := l.validate(); err != nil {
		t.Fatal(err)
	}
	l.RequestTimeout = l.WriteTimeout
	if err := l.validate(); err == nil {
		t.Error("a request timeout as long as the write timeout passed")
	}
	l = DefaultLimits()
	l.MaxHeaderBytes = 0
	if err := l.validate(); err == nil {
		t.Error("a zero limit passed")
	}
}
