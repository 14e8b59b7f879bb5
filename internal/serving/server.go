// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package serving

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	authorizationv1 "k8s.io/api/authorization/v1"
	certutil "k8s.io/client-go/util/cert"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
)

// Names of the certificate and key in Options.CertDir, as in a kubernetes.io/tls Secret.
const (
	CertName = "tls.crt"
	KeyName  = "tls.key"
)

// Route is a path the server serves and the tokens it accepts there.
type Route struct {
	// Path is a ServeMux pattern: "/metrics", or "/inspect/" for everything below it.
	Path    string
	Handler http.Handler
	// Audiences are the token audiences the route accepts, tried in order (one
	// TokenReview each until one accepts): AgentAudience, APIServerAudience.
	Audiences []string
}

// Limits bound what one request may cost. Every field must be positive.
type Limits struct {
	// ReadHeaderTimeout, ReadTimeout, WriteTimeout, IdleTimeout and MaxHeaderBytes are
	// http.Server's (MaxHeaderBytes counts the request line too).
	ReadHeaderTimeout, ReadTimeout, WriteTimeout, IdleTimeout time.Duration
	MaxHeaderBytes                                            int
	// MaxBodyBytes bounds a request body; every route only reads, so a body is noise.
	MaxBodyBytes int64
	// RequestTimeout bounds the handling of a request, reviews included: past it the
	// caller gets 503. It must be shorter than WriteTimeout for the 503 to arrive.
	RequestTimeout time.Duration
	// MaxInFlight bounds the requests handled at once; more get 429 before any review.
	MaxInFlight int
}

// DefaultLimits suit a scrape (up to a few MB of metrics) and an inspection of a pod with
// thousands of tasks, and nothing much bigger.
func DefaultLimits() Limits {
	return Limits{
		ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second,
		WriteTimeout: 30 * time.Second, IdleTimeout: 60 * time.Second,
		MaxHeaderBytes: 32 << 10, MaxBodyBytes: 4 << 10,
		RequestTimeout: 20 * time.Second, MaxInFlight: 32,
	}
}

func (l Limits) validate() error {
	if l.ReadHeaderTimeout <= 0 || l.ReadTimeout <= 0 || l.WriteTimeout <= 0 || l.IdleTimeout <= 0 ||
		l.MaxHeaderBytes <= 0 || l.MaxBodyBytes <= 0 || l.RequestTimeout <= 0 || l.MaxInFlight <= 0 {
		return fmt.Errorf("serving: every limit must be positive: %+v", l)
	}
	if l.RequestTimeout >= l.WriteTimeout {
		return fmt.Errorf("serving: the request timeout (%s) must be shorter than the write timeout (%s)", l.RequestTimeout, l.WriteTimeout)
	}
	return nil
}

// Options configure a Server.
type Options struct {
	// BindAddress is host:port; port 0 picks one (Addr tells which).
	BindAddress string
	// CertDir holds CertName and KeyName, re-read when they change. Empty means a
	// self-signed certificate made at start, which no client can verify.
	CertDir string
	// GetCertificate, when set, gives the certificate instead (the agent's
	// agentcert.NodeCertificate: this node's own); CertDir must then be empty.
	GetCertificate func(*tls.ClientHelloInfo) (*tls.Certificate, error)
	Routes         []Route
	Auth           *Auth
	Limits         Limits
	Log            logr.Logger
}

// Server serves Routes over HTTPS; it is a controller-runtime Runnable.
type Server struct {
	o       Options
	tls     *tls.Config
	watcher *certwatcher.CertWatcher

	mu   sync.Mutex
	addr string
}

// NewServer checks o and loads the certificate: a CertDir without a readable key pair is
// an error, never a quiet fallback to a self-signed certificate.
func NewServer(o Options) (*Server, error) {
	if o.Auth == nil {
		return nil, errors.New("serving: Auth is required: every route authenticates and authorizes")
	}
	if err := o.Limits.validate(); err != nil {
		return nil, err
	}
	s := &Server{o: o, tls: &tls.Config{
		MinVersion: tls.VersionTLS12,
		// HTTP/1.1 only: the timeouts above are HTTP/1 semantics, and HTTP/2's stream
		// multiplexing (rapid reset, CONTINUATION floods) is attack surface a scrape and
		// a plugin do not need.
		NextProtos: []string{"http/1.1"},
	}}
	if o.GetCertificate != nil {
		if o.CertDir != "" {
			return nil, errors.New("serving: a certificate directory and a certificate source are exclusive")
		}
		s.tls.GetCertificate = o.GetCertificate
		return s, nil
	}
	if o.CertDir == "" {
		cert, key, err := certutil.GenerateSelfSignedCertKey("localhost", []net.IP{net.IPv4(127, 0, 0, 1)}, nil)
		if err != nil {
			return nil, fmt.Errorf("serving: making a self-signed certificate: %w", err)
		}
		pair, err := tls.X509KeyPair(cert, key)
		if err != nil {
			return nil, fmt.Errorf("serving: loading the self-signed certificate: %w", err)
		}
		s.tls.Certificates = []tls.Certificate{pair}
		return s, nil
	}
	w, err := certwatcher.New(filepath.Join(o.CertDir, CertName), filepath.Join(o.CertDir, KeyName))
	if err != nil {
		return nil, fmt.Errorf("serving: loading the serving certificate from %s: %w", o.CertDir, err)
	}
	s.watcher = w
	s.tls.GetCertificate = w.GetCertificate
	return s, nil
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: every agent serves.
func (*Server) NeedLeaderElection() bool { return false }

// Addr is the address the server listens on once started.
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

// Start serves until ctx is done, then shuts down gracefully (at most the write timeout).
func (s *Server) Start(ctx context.Context) error {
	l, err := (&net.ListenConfig{}).Listen(ctx, "tcp", s.o.BindAddress)
	if err != nil {
		return fmt.Errorf("serving: listening on %s: %w", s.o.BindAddress, err)
	}
	s.mu.Lock()
	s.addr = l.Addr().String()
	s.mu.Unlock()

	watchDone := make(chan struct{})
	switch {
	case s.o.GetCertificate != nil:
		close(watchDone)
	case s.watcher != nil:
		go func() {
			defer close(watchDone)
			if err := s.watcher.Start(ctx); err != nil {
				s.o.Log.Error(err, "Watching the serving certificate failed; the one loaded stays")
			}
		}()
	default:
		close(watchDone)
		s.o.Log.Info("Serving a self-signed certificate: clients cannot verify it (see --tls-cert-dir)")
	}

	lim := s.o.Limits
	srv := &http.Server{
		Handler:           s.handler(),
		ReadHeaderTimeout: lim.ReadHeaderTimeout,
		ReadTimeout:       lim.ReadTimeout,
		WriteTimeout:      lim.WriteTimeout,
		IdleTimeout:       lim.IdleTimeout,
		MaxHeaderBytes:    lim.MaxHeaderBytes,
		TLSNextProto:      map[string]func(*http.Server, *tls.Conn, http.Handler){},
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	shutdown := make(chan error, 1)
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), lim.WriteTimeout)
		defer cancel()
		shutdown <- srv.Shutdown(sctx)
	}()
	s.o.Log.Info("Serving", "address", s.Addr(), "certDir", s.o.CertDir)
	err = srv.Serve(tls.NewListener(l, s.tls))
	if errors.Is(err, http.ErrServerClosed) {
		err = <-shutdown
	}
	<-watchDone
	return err
}

// handler is the mux of guarded routes, behind the in-flight bound and the deadline.
func (s *Server) handler() http.Handler {
	mux := http.NewServeMux()
	for _, r := range s.o.Routes {
		mux.Handle(r.Path, s.guard(r))
	}
	lim := s.o.Limits
	inFlight := make(chan struct{}, lim.MaxInFlight)
	timed := http.TimeoutHandler(mux, lim.RequestTimeout, "the request took too long\n")
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		select {
		case inFlight <- struct{}{}:
			defer func() { <-inFlight }()
		default:
			w.Header().Set("Retry-After", "1")
			http.Error(w, "too many requests in flight", http.StatusTooManyRequests)
			return
		}
		timed.ServeHTTP(w, req)
	})
}

// guard checks, in order: method and body size (free), the token (locally, then a
// TokenReview for the route's audiences), get on the non-resource URL
// (SubjectAccessReview); then the route's handler runs with the caller in its context.
// Reviews not answered from the cache are rate-limited per client (429).
func (s *Server) guard(r Route) http.Handler {
	log := s.o.Log.WithValues("path", r.Path)
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodGet && req.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "only GET and HEAD are served", http.StatusMethodNotAllowed)
			return
		}
		if req.ContentLength > s.o.Limits.MaxBodyBytes {
			http.Error(w, "request body too large", http.StatusRequestEntityTooLarge)
			return
		}
		req.Body = http.MaxBytesReader(w, req.Body, s.o.Limits.MaxBodyBytes)

		token, ok := bearerToken(req)
		if !ok {
			unauthorized(w, r.Audiences)
			return
		}
		req = req.WithContext(withClient(req.Context(), clientKey(req.RemoteAddr)))
		u, err := s.o.Auth.authenticate(req.Context(), token, r.Audiences)
		if errors.Is(err, ErrReviewRateLimited) {
			tooManyReviews(w)
			return
		}
		if err != nil {
			log.Error(err, "Authentication failed")
			http.Error(w, "authentication is unavailable: the token could not be reviewed", http.StatusServiceUnavailable)
			return
		}
		if u == nil {
			log.V(4).Info("Unauthenticated request")
			unauthorized(w, r.Audiences)
			return
		}
		// HEAD is a GET without the body; RBAC rules name it get.
		d, err := s.o.Auth.authorize(req.Context(), u, &authorizationv1.NonResourceAttributes{Path: req.URL.Path, Verb: "get"}, nil)
		if errors.Is(err, ErrReviewRateLimited) {
			tooManyReviews(w)
			return
		}
		if err != nil {
			log.Error(err, "Authorization failed", "user", u.Name)
			http.Error(w, "authorization is unavailable: the access could not be reviewed", http.StatusServiceUnavailable)
			return
		}
		if !d.allowed {
			log.V(4).Info("Forbidden", "user", u.Name, "reason", d.reason)
			http.Error(w, fmt.Sprintf("Authorization denied for user %s: get on %s is not allowed", u.Name, req.URL.Path), http.StatusForbidden)
			return
		}
		r.Handler.ServeHTTP(w, req.WithContext(withUser(req.Context(), u)))
	})
}

func bearerToken(req *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(req.Header.Get("Authorization"), " ")
	token = strings.TrimSpace(token)
	return token, ok && strings.EqualFold(scheme, "Bearer") && token != ""
}

func tooManyReviews(w http.ResponseWriter) {
	w.Header().Set("Retry-After", "1")
	http.Error(w, "too many token and access reviews from this client; retry later", http.StatusTooManyRequests)
}

func unauthorized(w http.ResponseWriter, audiences []string) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="numapref-agent"`)
	http.Error(w, "Unauthorized: send a bearer token for "+describeAudiences(audiences), http.StatusUnauthorized)
}

func describeAudiences(audiences []string) string {
	var names []string
	for _, a := range audiences {
		if a == APIServerAudience {
			names = append(names, "the API server")
		} else {
			names = append(names, "audience "+a)
		}
	}
	return strings.Join(names, " or ")
}

// AgentRoutes are the node agent's routes: /metrics, which takes tokens bound to
// AgentAudience and, unless metricsAgentOnly, the API server's own (a Prometheus pod's
// service account token); and inspectPath, which takes AgentAudience only.
func AgentRoutes(metrics http.Handler, inspectPath string, inspect http.Handler, metricsAgentOnly bool) []Route {
	metricsAudiences := []string{AgentAudience, APIServerAudience}
	if metricsAgentOnly {
		metricsAudiences = metricsAudiences[:1]
	}
	return []Route{
		{Path: "/metrics", Handler: metrics, Audiences: metricsAudiences},
		{Path: inspectPath, Handler: inspect, Audiences: []string{AgentAudience}},
	}
}
