// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

// Package nri makes the agent an NRI plugin of the container runtime (containerd >= 1.7,
// CRI-O): the runtime hands it each container it is about to start, after the
// container's init process exists and before it runs the user's program, and the plugin
// passes the container to a Placer. The agent can then place a new container's first task
// before the API even reports the pod's status.
//
// The plugin never fails a start and never holds the runtime past its request timeout: the
// placer gets a deadline shorter than the runtime's, and the plugin answers when it passes
// whether or not the placer has returned (see PlaceAtStart). The one change it asks of the
// runtime is a selected container's memory policy at creation (CreateContainer's
// linux.memoryPolicy, which the OCI runtime sets in its init before exec).
//
//	plugin.go       Config, Plugin, the connect-serve-reconnect loop (Start), Stats
//	handler.go      one connection's handlers (CreateContainer, StartContainer,
//	                Synchronize) and startOf, which turns the NRI types into a Start
//	startplacer.go  StartPlacer, the agent's Placer: it decides as the API path does, from
//	                the agent's cache or the persisted NumaPreferences, and the engine places
//	prefstore.go    PreferenceStore: the NumaPreferences last seen, kept in the state dir
//	                for an agent restarted while the API is unreachable
//	metrics.go      the plugin's metrics collector (NewCollector; defined in internal/metrics)
package nri

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/nri/pkg/stub"
	"github.com/go-logr/logr"
	"k8s.io/utils/clock"

	"github.com/numapref/numapref/internal/numa/mempolicy"
)

// Defaults of Config's fields.
const (
	DefaultSocket         = api.DefaultSocketPath // "/var/run/nri/nri.sock"
	DefaultPluginName     = "numapref"
	DefaultPluginIdx      = "50"
	DefaultRequestTimeout = 1500 * time.Millisecond // the runtimes' default is 2 s
	DefaultMinBackoff     = 100 * time.Millisecond
	DefaultMaxBackoff     = 5 * time.Second
)

// replyMargin is kept free before the deadline of the runtime's request for the reply to
// reach it: the placer's deadline is never later than the runtime's minus this.
const replyMargin = 200 * time.Millisecond

// defaultStuckGrace is how long a connection's stub gets to return once its connection is
// lost or Start's ctx ends. Only a stub stuck between registering and being configured
// (the library's Start then waits for a configuration that never comes, holding its own
// lock) takes longer; it is abandoned, and counted in Stats.Abandoned.
const defaultStuckGrace = 2 * time.Second

// Start is one container the runtime is about to start or, at Synchronize, already runs.
type Start struct {
	// PodUID, Namespace and PodName identify the container's pod; Labels and Annotations
	// are its pod sandbox's. The maps are the Start's own.
	PodUID, Namespace, PodName string
	Labels, Annotations        map[string]string
	// Container is the container's name in the pod, ContainerID the runtime's id.
	Container, ContainerID string
	// Pid is the container's init process; 0 when the runtime gives none (CRI-O before
	// 1.36). At StartContainer it exists and has not yet run the container's program.
	Pid int
	// CgroupsPath is the runtime's cgroups path of the container (OCI
	// linux.cgroupsPath: a path, or systemd's "slice:prefix:name").
	CgroupsPath string
	// CpusetMems is the container's cpuset.mems as the runtime sets it, "" if it sets none.
	CpusetMems string
	// Running is true for a container the runtime reported at Synchronize: it was running
	// when the plugin connected, and its tasks may already run the container's program.
	Running bool
	// CpusetCPUs is the container's cpuset.cpus as the runtime sets it, "" if it sets none.
	CpusetCPUs string
}

// Placer places containers as they start.
type Placer interface {
	// PlaceAtStart places s. It should return by ctx's deadline: the plugin answers the
	// runtime then whether or not it has returned, and a placer still running is
	// abandoned (it keeps running; its ctx is done; Stats counts it as late). Nothing it
	// does can fail the start.
	PlaceAtStart(ctx context.Context, s Start)
	// PolicyAtCreation is the memory policy the runtime should give container s, which it
	// is creating (no task, no cgroup yet), or nil for none. It should return by ctx's
	// deadline, as PlaceAtStart; a late answer is dropped and the container is created
	// without a policy.
	PolicyAtCreation(ctx context.Context, s Start) *mempolicy.OCIPolicy
}

// Config configures a Plugin. Zero fields take the defaults above.
type Config struct {
	// Socket is the runtime's NRI socket.
	Socket string
	// PluginName and PluginIdx register the plugin: the runtime calls plugins in the
	// order of their two-digit index.
	PluginName, PluginIdx string
	// RequestTimeout is the placer's deadline for each container. It should be below the
	// runtime's request timeout (2 s by default); the plugin also keeps the placer's
	// deadline replyMargin before the runtime's own.
	RequestTimeout time.Duration
	// MinBackoff and MaxBackoff bound the wait before connecting again after the socket
	// was absent, refused the plugin or the connection was lost (the runtime restarted);
	// the wait doubles from MinBackoff after each failure, and resets once a connection
	// synchronized.
	MinBackoff, MaxBackoff time.Duration
	// Placer gets each starting container. Required.
	Placer Placer
	// Clock times the backoff; nil means the real clock.
	Clock clock.Clock
	Log   logr.Logger

	// stuckGrace is defaultStuckGrace unless a test makes it shorter.
	stuckGrace time.Duration
}

// Stats counts what the plugin did, for the agent's metrics.
type Stats struct {
	// Connects counts connections that registered and synchronized; DialFailures the
	// connection attempts that failed before that (socket absent or refused, registration
	// refused); Disconnects the synchronized connections that were lost.
	Connects, DialFailures, Disconnects uint64
	// Starts counts StartContainer requests handed to the placer; Synced the running
	// containers handed to it after Synchronize; Creates the CreateContainer requests, and
	// Policies those answered with a memory policy.
	Starts, Synced, Creates, Policies uint64
	// Late counts placer calls that had not returned by their deadline; LateRunning is how
	// many of those still have not.
	Late, LateRunning uint64
	// Abandoned counts connections whose library stub did not stop (defaultStuckGrace).
	Abandoned uint64
	// Panics counts placer calls that panicked: the runtime got its answer, the agent
	// kept running, and the container is placed once the API reports it running.
	Panics uint64
}

// counters are Stats, updated atomically.
type counters struct {
	connects, dialFailures, disconnects, starts, synced, creates, policies, late, lateRunning, abandoned, panics atomic.Uint64
}

// Plugin is the agent's NRI plugin. Start runs it.
type Plugin struct {
	cfg       Config
	connected atomic.Bool
	changes   chan struct{} // a value when Connected changed since it was last read
	stats     counters
}

// New checks cfg, fills in its defaults and returns a plugin that is not yet connected.
func New(cfg Config) (*Plugin, error) {
	if cfg.Placer == nil {
		return nil, errors.New("nri plugin: no placer")
	}
	if cfg.Socket == "" {
		cfg.Socket = DefaultSocket
	}
	if cfg.PluginName == "" {
		cfg.PluginName = DefaultPluginName
	}
	if cfg.PluginIdx == "" {
		cfg.PluginIdx = DefaultPluginIdx
	}
	if err := api.CheckPluginName(cfg.PluginName); err != nil {
		return nil, fmt.Errorf("nri plugin: %w", err)
	}
	if err := api.CheckPluginIndex(cfg.PluginIdx); err != nil {
		return nil, fmt.Errorf("nri plugin: %w", err)
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = DefaultRequestTimeout
	}
	if cfg.MinBackoff <= 0 {
		cfg.MinBackoff = DefaultMinBackoff
	}
	if cfg.MaxBackoff < cfg.MinBackoff {
		cfg.MaxBackoff = max(DefaultMaxBackoff, cfg.MinBackoff)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.stuckGrace <= 0 {
		cfg.stuckGrace = defaultStuckGrace
	}
	return &Plugin{cfg: cfg, changes: make(chan struct{}, 1)}, nil
}

// NeedLeaderElection says the plugin runs on every node (controller-runtime's
// LeaderElectionRunnable).
func (p *Plugin) NeedLeaderElection() bool { return false }

// Connected is true from the runtime's Synchronize (the end of registration) until the
// connection is lost.
func (p *Plugin) Connected() bool { return p.connected.Load() }

// Changes has a value whenever Connected changed since the value was last taken: the
// agent's report and node label follow it.
func (p *Plugin) Changes() <-chan struct{} { return p.changes }

// setConnected records whether the plugin is connected, and signals a change.
func (p *Plugin) setConnected(v bool) {
	if p.connected.Swap(v) == v {
		return
	}
	select {
	case p.changes <- struct{}{}:
	default: // one is pending already
	}
}

// Stats returns the counts so far.
func (p *Plugin) Stats() Stats {
	s := &p.stats
	return Stats{
		Connects: s.connects.Load(), DialFailures: s.dialFailures.Load(), Disconnects: s.disconnects.Load(),
		Starts: s.starts.Load(), Synced: s.synced.Load(), Creates: s.creates.Load(), Policies: s.policies.Load(),
		Late: s.late.Load(), LateRunning: s.lateRunning.Load(),
		Abandoned: s.abandoned.Load(), Panics: s.panics.Load(),
	}
}

// Start connects to the runtime and serves it until ctx ends, connecting again with
// backoff whenever the socket is absent, the runtime refuses the plugin or the connection
// is lost. It returns nil when ctx ends: a runtime without NRI is not an error, the agent
// just places containers later. (controller-runtime's manager.Runnable.)
func (p *Plugin) Start(ctx context.Context) error {
	log := p.cfg.Log.WithValues("socket", p.cfg.Socket)
	delay := p.cfg.MinBackoff
	failing := false // log a run of failures once
	for {
		synced, err := p.serve(ctx)
		if ctx.Err() != nil {
			return nil
		}
		switch {
		case synced:
			p.stats.disconnects.Add(1)
			log.Info("NRI connection lost; connecting again")
			delay, failing = p.cfg.MinBackoff, false
		case !failing:
			log.Info("NRI runtime not reachable; retrying", "error", err)
			failing = true
			p.stats.dialFailures.Add(1)
		default:
			log.V(3).Info("NRI runtime still not reachable", "error", err)
			p.stats.dialFailures.Add(1)
		}
		t := p.cfg.Clock.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C():
		}
		delay = min(2*delay, p.cfg.MaxBackoff)
	}
}

// serve runs one connection: it dials, registers and serves until the connection is lost
// or ctx ends. synced says whether the runtime synchronized the plugin.
func (p *Plugin) serve(ctx context.Context) (synced bool, err error) {
	c := &conn{p: p, ctx: ctx, lost: make(chan struct{})}
	st, err := stub.New(c,
		stub.WithPluginName(p.cfg.PluginName),
		stub.WithPluginIdx(p.cfg.PluginIdx),
		stub.WithSocketPath(p.cfg.Socket),
		stub.WithDialer(c.dial),
		stub.WithLogger(nriLogger{p.cfg.Log}),
		// A reply that misses the runtime's timeout costs that one request, not the
		// connection (and a new Synchronize of every container).
		stub.WithFailurePolicy(&api.FailurePolicy{KeepConnected: true}),
	)
	if err != nil {
		return false, fmt.Errorf("creating the NRI stub: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- st.Run(ctx) }()
	select {
	case err = <-done:
	case <-ctx.Done():
		err = c.stop(done)
	case <-c.lost:
		err = c.stop(done)
	}
	p.setConnected(false)
	return c.synced.Load(), err
}

// conn is one connection to the runtime: the stub's plugin (handler.go) and its socket.
type conn struct {
	p      *Plugin
	ctx    context.Context // Start's: ends placers of synchronized containers
	synced atomic.Bool

	mu       sync.Mutex
	sock     net.Conn
	lost     chan struct{} // closed when reading the socket fails
	lostOnce sync.Once
}

// dial connects to the runtime's socket, for the stub.
func (c *conn) dial(path string) (net.Conn, error) {
	var d net.Dialer
	sock, err := d.DialContext(c.ctx, "unix", path)
	if err != nil {
		return nil, fmt.Errorf("dialing %s: %w", path, err)
	}
	c.mu.Lock()
	c.sock = sock
	c.mu.Unlock()
	return watchedConn{Conn: sock, c: c}, nil
}

// stop closes the socket and waits Config.stuckGrace for the stub's Run to return.
func (c *conn) stop(done <-chan error) error {
	c.mu.Lock()
	if c.sock != nil {
		_ = c.sock.Close() // the stub may have closed it already
	}
	c.mu.Unlock()
	t := c.p.cfg.Clock.NewTimer(c.p.cfg.stuckGrace)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C():
		c.p.stats.abandoned.Add(1)
		return errors.New("the NRI stub did not stop; abandoned it")
	}
}

// watchedConn tells its conn when the runtime's side is gone: the stub's multiplexer
// always reads the socket, so a failed read is a lost connection.
type watchedConn struct {
	net.Conn
	c *conn
}

func (w watchedConn) Read(b []byte) (int, error) {
	n, err := w.Conn.Read(b)
	if err != nil {
		w.c.lostOnce.Do(func() { close(w.c.lost) })
	}
	return n, err
}
