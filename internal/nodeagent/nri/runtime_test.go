package nri

import (
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/adaptation"
	"github.com/containerd/nri/pkg/api"
	nrilog "github.com/containerd/nri/pkg/log"
	"github.com/go-logr/logr"

	"github.com/numapref/numapref/internal/testutil/poll"
)

// The tests drive the runtime side containerd and CRI-O embed (nri's adaptation package)
// in the test's process; the plugin reaches it through a real unix socket and ttrpc.

// wait bounds every wait of these tests; none takes it when the plugin behaves.
const wait = 10 * time.Second

func TestMain(m *testing.M) {
	nrilog.Set(nriLogger{logr.Discard()}) // the adaptation logs through the library's global logger
	os.Exit(m.Run())
}

// fakeRuntime is a container runtime's NRI side. Its socket is a proxy in front of the
// adaptation's: Adaptation.Stop leaves external plugins' connections open (a runtime's
// process ends, which closes them), so a restart closes the proxy's connections too.
type fakeRuntime struct {
	t           testing.TB
	dir, socket string // socket is the one the plugin dials, the proxy's
	inner       string // the adaptation's
	metrics     *runtimeMetrics

	mu    sync.Mutex
	pods  []*api.PodSandbox // what Synchronize reports
	ctrs  []*api.Container
	a     *adaptation.Adaptation
	proxy *proxy
}

// newRuntime returns a runtime that is not started: its socket does not exist yet.
func newRuntime(t testing.TB) *fakeRuntime {
	dir := t.TempDir()
	r := &fakeRuntime{
		t: t, dir: dir, metrics: &runtimeMetrics{},
		socket: filepath.Join(dir, "nri.sock"), inner: filepath.Join(dir, "adaptation.sock"),
	}
	t.Cleanup(r.stop)
	return r
}

// startRuntime returns a started runtime.
func startRuntime(t testing.TB) *fakeRuntime {
	r := newRuntime(t)
	r.start()
	return r
}

// start starts the adaptation and the proxy in front of it.
func (r *fakeRuntime) start() {
	r.t.Helper()
	a, err := adaptation.New("fake-runtime", "v0.0.0", r.synchronize,
		func(context.Context, []*api.ContainerUpdate) ([]*api.ContainerUpdate, error) { return nil, nil },
		adaptation.WithSocketPath(r.inner),
		adaptation.WithPluginPath(filepath.Join(r.dir, "plugins")),
		adaptation.WithPluginConfigPath(filepath.Join(r.dir, "conf.d")),
		adaptation.WithMetrics(r.metrics))
	if err != nil {
		r.t.Fatalf("creating the adaptation: %v", err)
	}
	if err := a.Start(); err != nil {
		r.t.Fatalf("starting the adaptation: %v", err)
	}
	px, err := startProxy(r.socket, r.inner)
	if err != nil {
		a.Stop()
		r.t.Fatal(err)
	}
	r.mu.Lock()
	r.a, r.proxy = a, px
	r.mu.Unlock()
}

// stop ends the runtime as its process's end would: no socket, every connection closed.
func (r *fakeRuntime) stop() {
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

// running sets what the next Synchronize reports.
func (r *fakeRuntime) running(pods []*api.PodSandbox, ctrs []*api.Container) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pods, r.ctrs = pods, ctrs
}

func (r *fakeRuntime) synchronize(ctx context.Context, cb adaptation.SyncCB) error {
	r.mu.Lock()
	pods, ctrs := r.pods, r.ctrs
	r.mu.Unlock()
	_, err := cb(ctx, pods, ctrs)
	return err
}

// startContainer relays a StartContainer to the plugins, as the runtime does between
// `runc create` and `runc start`.
func (r *fakeRuntime) startContainer(pod *api.PodSandbox, ctr *api.Container) error {
	r.mu.Lock()
	a := r.a
	r.mu.Unlock()
	return a.StartContainer(context.Background(), &api.StartContainerRequest{Pod: pod, Container: ctr})
}

// waitPlugin waits until the runtime has the plugin registered and synchronized: the
// requests it relays from then on reach the plugin.
func (r *fakeRuntime) waitPlugin() {
	r.t.Helper()
	poll.True(r.t, wait, "the runtime has the plugin", func() bool { return r.metrics.plugins() == 1 })
}

// runtimeMetrics records what the adaptation reports of its plugins.
type runtimeMetrics struct {
	mu          sync.Mutex
	count       int
	invocations []invocation
}

// invocation is one request the adaptation relayed, and the plugin's answer.
type invocation struct {
	plugin, op string
	err        error
}

func (m *runtimeMetrics) RecordPluginInvocation(plugin, op string, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.invocations = append(m.invocations, invocation{plugin, op, err})
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
func (m *runtimeMetrics) answers(op string) []invocation {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []invocation
	for _, in := range m.invocations {
		if in.op == op {
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

// runningPlugin is a Plugin whose Start runs until the test ends.
type runningPlugin struct {
	*Plugin
	cancel context.CancelFunc
	done   chan error // Start's return
}

// startPlugin starts a plugin on socket with placer and the tests' short backoff; edit
// adjusts its config.
func startPlugin(t testing.TB, socket string, placer Placer, edit ...func(*Config)) *runningPlugin {
	t.Helper()
	cfg := Config{
		Socket: socket, Placer: placer, Log: logr.Discard(),
		MinBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond,
	}
	for _, e := range edit {
		e(&cfg)
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	rp := &runningPlugin{Plugin: p, cancel: cancel, done: make(chan error, 1)}
	go func() { rp.done <- p.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-rp.done:
			if err != nil {
				t.Errorf("Start = %v, want nil", err)
			}
		case <-time.After(wait):
			t.Errorf("Start did not return within %s of its ctx's end", wait)
		}
	})
	return rp
}

// stop cancels Start's ctx and returns what Start returned.
func (rp *runningPlugin) stop(t testing.TB) error {
	t.Helper()
	rp.cancel()
	select {
	case err := <-rp.done:
		rp.done <- err // for the cleanup
		return err
	case <-time.After(wait):
		t.Fatalf("Start did not return within %s of its ctx's end", wait)
		return nil
	}
}

// placements is a Placer that sends what it gets to a channel.
type placements chan Start

func (p placements) PlaceAtStart(_ context.Context, s Start) { p <- s }

// next is the next placement, or fails the test.
func (p placements) next(t testing.TB) Start {
	t.Helper()
	select {
	case s := <-p:
		return s
	case <-time.After(wait):
		t.Fatalf("no placement within %s", wait)
		return Start{}
	}
}

// placerFunc is a Placer made of a function.
type placerFunc func(context.Context, Start)

func (f placerFunc) PlaceAtStart(ctx context.Context, s Start) { f(ctx, s) }
