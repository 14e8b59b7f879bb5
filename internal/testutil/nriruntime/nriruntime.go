// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

// Package nriruntime is a container runtime's NRI side for tests: the adaptation package
// containerd and CRI-O embed, run in the test's process on a unix socket, so that a plugin
// reaches it through a real socket and ttrpc.
package nriruntime

import (
	"context"
	"io"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/adaptation"
	"github.com/containerd/nri/pkg/api"
	nrilog "github.com/containerd/nri/pkg/log"

	"github.com/numapref/numapref/internal/testutil/poll"
)

// Wait bounds WaitPlugin; a plugin that behaves takes far less.
const Wait = 10 * time.Second

// quiet silences the adaptation, which logs through the library's global logger.
type quiet struct{}

func (quiet) Debugf(context.Context, string, ...any) {}
func (quiet) Infof(context.Context, string, ...any)  {}
func (quiet) Warnf(context.Context, string, ...any)  {}
func (quiet) Errorf(context.Context, string, ...any) {}

var silence sync.Once

// Runtime is a container runtime's NRI side. Its socket is a proxy in front of the
// adaptation's: Adaptation.Stop leaves external plugins' connections open (a runtime's
// process ends, which closes them), so a restart closes the proxy's connections too.
type Runtime struct {
	t      testing.TB
	dir    string
	Socket string // the one the plugin dials, the proxy's
	// Direct is the adaptation's own socket, without the proxy: for a benchmark of the
	// round trip (a restart, Stop then Start, leaves its connections open).
	Direct  string
	metrics *runtimeMetrics

	mu    sync.Mutex
	pods  []*api.PodSandbox // what Synchronize reports
	ctrs  []*api.Container
	a     *adaptation.Adaptation
	proxy *proxy
}

// New returns a runtime that is not started: its socket does not exist yet.
func New(t testing.TB) *Runtime {
	silence.Do(func() { nrilog.Set(quiet{}) })
	dir := t.TempDir()
	r := &Runtime{
		t: t, dir: dir, metrics: &runtimeMetrics{},
		Socket: filepath.Join(dir, "nri.sock"), Direct: filepath.Join(dir, "adaptation.sock"),
	}
	t.Cleanup(r.Stop)
	return r
}

// Start returns a started runtime.
func Start(t testing.TB) *Runtime {
	r := New(t)
	r.Start()
	return r
}

// Start starts the adaptation and the proxy in front of it.
func (r *Runtime) Start() {
	r.t.Helper()
	a, err := adaptation.New("fake-runtime", "v0.0.0", r.synchronize,
		func(context.Context, []*api.ContainerUpdate) ([]*api.ContainerUpdate, error) { return nil, nil },
		adaptation.WithSocketPath(r.Direct),
		adaptation.WithPluginPath(filepath.Join(r.dir, "plugins")),
		adaptation.WithPluginConfigPath(filepath.Join(r.dir, "conf.d")),
		adaptation.WithMetrics(r.metrics))
	if err != nil {
		r.t.Fatalf("creating the adaptation: %v", err)
	}
	if err := a.Start(); err != nil {
		r.t.Fatalf("starting the adaptation: %v", err)
	}
	px, err := startProxy(r.Socket, r.Direct)
	if err != nil {
		a.Stop()
		r.t.Fatal(err)
	}
	r.mu.Lock()
	r.a, r.proxy = a, px
	r.mu.Unlock()
}

// Stop ends the runtime as its process's end would: no socket, every connection closed.
func (r *Runtime) Stop() {
	r.mu.Lock()
	a, px := r.a, r.proxy
	r.a, r.proxy = nil, nil
	r.mu.Unlock()
	if a == nil {
		return
	}
	px.close()
	a.Stop()
	r.metrics.setPlugins(0)
}

// Running sets what the next Synchronize reports.
func (r *Runtime) Running(pods []*api.PodSandbox, ctrs []*api.Container) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pods, r.ctrs = pods, ctrs
}

func (r *Runtime) synchronize(ctx context.Context, cb adaptation.SyncCB) error {
	r.mu.Lock()
	pods, ctrs := r.pods, r.ctrs
	r.mu.Unlock()
	_, err := cb(ctx, pods, ctrs)
	return err
}

// StartContainer relays a StartContainer to the plugins, as the runtime does between
// `runc create` and `runc start`.
func (r *Runtime) StartContainer(pod *api.PodSandbox, ctr *api.Container) error {
	r.mu.Lock()
	a := r.a
	r.mu.Unlock()
	return a.StartContainer(context.Background(), &api.StartContainerRequest{Pod: pod, Container: ctr})
}

// CreateContainer relays a CreateContainer to the plugins, as the runtime does before it
// writes the container's OCI spec, and returns their combined adjustment.
func (r *Runtime) CreateContainer(pod *api.PodSandbox, ctr *api.Container) (*api.ContainerAdjustment, error) {
	r.mu.Lock()
	a := r.a
	r.mu.Unlock()
	rsp, err := a.CreateContainer(context.Background(), &api.CreateContainerRequest{Pod: pod, Container: ctr})
	if err != nil {
		return nil, err
	}
	return rsp.GetAdjust(), nil
}

// WaitPlugin waits until the runtime has the plugin registered and synchronized: the
// requests it relays from then on reach the plugin.
func (r *Runtime) WaitPlugin() {
	r.t.Helper()
	poll.True(r.t, Wait, "the runtime has the plugin", func() bool { return r.metrics.plugins() == 1 })
}

// Plugins is how many plugins the runtime has registered and synchronized.
func (r *Runtime) Plugins() int { return r.metrics.plugins() }

// Answers are the plugins' answers to op (an event's PrettyName, or "Synchronize") so far.
func (r *Runtime) Answers(op string) []Invocation { return r.metrics.answers(op) }

// runtimeMetrics records what the adaptation reports of its plugins.
type runtimeMetrics struct {
	mu          sync.Mutex
	count       int
	Invocations []Invocation
}

// Invocation is one request the adaptation relayed, and the plugin's answer.
type Invocation struct {
	Plugin, Op string
	Err        error
}

func (m *runtimeMetrics) RecordPluginInvocation(plugin, op string, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.Invocations = append(m.Invocations, Invocation{plugin, op, err})
}

func (m *runtimeMetrics) RecordPluginLatency(string, string, time.Duration) {}

func (m *runtimeMetrics) RecordPluginAdjustments(string, string, *api.ContainerAdjustment, int, int) {
}

func (m *runtimeMetrics) UpdatePluginCount(n int) { m.setPlugins(n) }

func (m *runtimeMetrics) setPlugins(n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.count = n
}

func (m *runtimeMetrics) plugins() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.count
}

// answers are the plugin's answers to op so far.
func (m *runtimeMetrics) answers(op string) []Invocation {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Invocation
	for _, in := range m.Invocations {
		if in.Op == op {
			out = append(out, in)
		}
	}
	return out
}

// proxy forwards the connections to one unix socket to another.
type proxy struct {
	l     net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func startProxy(from, to string) (*proxy, error) {
	l, err := net.Listen("unix", from)
	if err != nil {
		return nil, err
	}
	p := &proxy{l: l}
	go p.serve(to)
	return p, nil
}

func (p *proxy) serve(to string) {
	for {
		in, err := p.l.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("unix", to)
		if err != nil {
			_ = in.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, in, out)
		p.mu.Unlock()
		pipe := func(dst, src net.Conn) {
			_, _ = io.Copy(dst, src)
			_ = dst.Close()
			_ = src.Close()
		}
		go pipe(in, out)
		go pipe(out, in)
	}
}

// close removes the socket and closes every connection.
func (p *proxy) close() {
	_ = p.l.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		_ = c.Close()
	}
}
