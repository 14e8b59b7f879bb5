// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package nri

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/nri/pkg/net/multiplex"
	"github.com/containerd/ttrpc"
	"github.com/google/go-cmp/cmp"

	"github.com/numapref/numapref/internal/testutil/nriruntime"
	"github.com/numapref/numapref/internal/testutil/poll"
)

// testPod and testContainer are a pod sandbox and one of its containers as the runtime
// reports them.
func testPod() *api.PodSandbox {
	return &api.PodSandbox{
		Id: "sandbox-1", Uid: "uid-1", Namespace: "ns", Name: "web-0",
		Labels:      map[string]string{"app": "web"},
		Annotations: map[string]string{"numapref.io/node": "1"},
	}
}

func testContainer(name string, pid int, state api.ContainerState) *api.Container {
	return &api.Container{
		Id: "id-" + name, PodSandboxId: "sandbox-1", Name: name, State: state, Pid: uint32(pid),
		Linux: &api.LinuxContainer{
			CgroupsPath: "kubepods-pod1.slice:cri-containerd:id-" + name,
			Resources:   &api.LinuxResources{Cpu: &api.LinuxCPU{Cpus: "0-3", Mems: "0-1"}},
		},
	}
}

// wantStart is the Start of testContainer(name, pid) in testPod.
func wantStart(name string, pid int, running bool) Start {
	return Start{
		PodUID: "uid-1", Namespace: "ns", PodName: "web-0",
		Labels:      map[string]string{"app": "web"},
		Annotations: map[string]string{"numapref.io/node": "1"},
		Container:   name, ContainerID: "id-" + name, Pid: pid,
		CgroupsPath: "kubepods-pod1.slice:cri-containerd:id-" + name,
		CpusetMems:  "0-1", CpusetCPUs: "0-3", Running: running,
	}
}

func TestStartOf(t *testing.T) {
	cases := map[string]struct {
		pod     *api.PodSandbox
		ctr     *api.Container
		running bool
		want    Start
	}{
		"every field": {
			pod: testPod(), ctr: testContainer("app", 42, api.ContainerState_CONTAINER_CREATED),
			want: wantStart("app", 42, false),
		},
		"running, at Synchronize": {
			pod: testPod(), ctr: testContainer("app", 42, api.ContainerState_CONTAINER_RUNNING), running: true,
			want: wantStart("app", 42, true),
		},
		"no pid, no linux section (CRI-O before 1.36)": {
			pod: testPod(), ctr: &api.Container{Id: "id-app", Name: "app"},
			want: Start{
				PodUID: "uid-1", Namespace: "ns", PodName: "web-0",
				Labels:      map[string]string{"app": "web"},
				Annotations: map[string]string{"numapref.io/node": "1"},
				Container:   "app", ContainerID: "id-app",
			},
		},
		"resources without a cpu section": {
			pod:  &api.PodSandbox{Uid: "u"},
			ctr:  &api.Container{Name: "c", Linux: &api.LinuxContainer{CgroupsPath: "/k/c", Resources: &api.LinuxResources{}}},
			want: Start{PodUID: "u", Container: "c", CgroupsPath: "/k/c"},
		},
		"no pod": {
			ctr:  &api.Container{Name: "c", Pid: 7},
			want: Start{Container: "c", Pid: 7},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := startOf(tc.pod, tc.ctr, tc.running)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("startOf (-want +got):\n%s", diff)
			}
		})
	}
}

func TestStartOfCopiesMaps(t *testing.T) {
	pod := testPod()
	s := startOf(pod, testContainer("app", 1, api.ContainerState_CONTAINER_RUNNING), true)
	s.Labels["app"] = "changed"
	if pod.Labels["app"] != "web" {
		t.Errorf("changing the Start's labels changed the pod's: %v", pod.Labels)
	}
}

func TestRunningStarts(t *testing.T) {
	other := &api.PodSandbox{Id: "sandbox-2", Uid: "uid-2", Namespace: "ns", Name: "db-0"}
	dbCtr := &api.Container{Id: "id-db", PodSandboxId: "sandbox-2", Name: "db", State: api.ContainerState_CONTAINER_RUNNING, Pid: 9}
	got := runningStarts([]*api.PodSandbox{testPod(), other}, []*api.Container{
		testContainer("created", 0, api.ContainerState_CONTAINER_CREATED),
		testContainer("running", 10, api.ContainerState_CONTAINER_RUNNING),
		testContainer("paused", 11, api.ContainerState_CONTAINER_PAUSED),
		testContainer("stopped", 0, api.ContainerState_CONTAINER_STOPPED),
		dbCtr,
	})
	want := []Start{
		wantStart("running", 10, true),
		wantStart("paused", 11, true),
		{PodUID: "uid-2", Namespace: "ns", PodName: "db-0", Container: "db", ContainerID: "id-db", Pid: 9, Running: true},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("runningStarts (-want +got):\n%s", diff)
	}
}

func TestNewChecksConfig(t *testing.T) {
	cases := map[string]Config{
		"no placer":          {},
		"index not 2 digits": {Placer: make(placements), PluginIdx: "5"},
		"name with a slash":  {Placer: make(placements), PluginName: "numa/pref"},
	}
	for name, cfg := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := New(cfg); err == nil {
				t.Errorf("New(%+v) = nil error, want one", cfg)
			}
		})
	}
	p, err := New(Config{Placer: make(placements)})
	if err != nil {
		t.Fatalf("New with defaults: %v", err)
	}
	if p.cfg.Socket != DefaultSocket || p.cfg.RequestTimeout != DefaultRequestTimeout || p.cfg.PluginIdx != DefaultPluginIdx {
		t.Errorf("defaults not filled in: %+v", p.cfg)
	}
}

// 1. The plugin registers: it says it is connected, and the runtime has it.
func TestRegisters(t *testing.T) {
	r := nriruntime.Start(t)
	p := startPlugin(t, r.Socket, make(placements))
	poll.True(t, wait, "the plugin connects", p.Connected)
	r.WaitPlugin()
	if got := p.Stats(); got.Connects != 1 {
		t.Errorf("Stats().Connects = %d, want 1", got.Connects)
	}
}

// 2. A StartContainer reaches the placer with every field, while the container's init (a
// real process here) exists; the runtime gets the plugin's success.
func TestStartContainerReachesPlacer(t *testing.T) {
	r := nriruntime.Start(t)
	type placed struct {
		s     Start
		alive error // signal 0 to s.Pid while placing
	}
	got := make(chan placed, 1)
	p := startPlugin(t, r.Socket, placerFunc(func(_ context.Context, s Start) {
		got <- placed{s, syscall.Kill(s.Pid, 0)}
	}))
	r.WaitPlugin()

	init := exec.Command("sleep", "60")
	if err := init.Start(); err != nil {
		t.Fatalf("starting the container's init: %v", err)
	}
	t.Cleanup(func() { _ = init.Process.Kill(); _ = init.Wait() })
	pid := init.Process.Pid

	if err := r.StartContainer(testPod(), testContainer("app", pid, api.ContainerState_CONTAINER_CREATED)); err != nil {
		t.Fatalf("the runtime's StartContainer: %v", err)
	}
	var pl placed
	select {
	case pl = <-got:
	case <-time.After(wait):
		t.Fatal("the placer got nothing")
	}
	if diff := cmp.Diff(wantStart("app", pid, false), pl.s); diff != "" {
		t.Errorf("the placer's Start (-want +got):\n%s", diff)
	}
	if pl.alive != nil {
		t.Errorf("the init process %d was not there while placing: %v", pid, pl.alive)
	}
	answers := r.Answers(api.Event_START_CONTAINER.PrettyName())
	if len(answers) != 1 || answers[0].Err != nil || answers[0].Plugin != "50-numapref" {
		t.Errorf("the runtime's record of StartContainer = %+v, want one success of 50-numapref", answers)
	}
	if s := p.Stats(); s.Starts != 1 || s.Late != 0 {
		t.Errorf("Stats() = %+v, want 1 start, none late", s)
	}
}

// 3. A placer that blocks past RequestTimeout does not hold the runtime: the plugin
// answers success before the runtime's own timeout (2 s; a plugin that waited for the
// placer would be recorded with DeadlineExceeded), stays connected, and counts the
// placer as late until it returns.
func TestSlowPlacerDoesNotHoldRuntime(t *testing.T) {
	r := nriruntime.Start(t)
	release := make(chan struct{})
	placerErr := make(chan error, 1)
	p := startPlugin(t, r.Socket, placerFunc(func(ctx context.Context, _ Start) {
		<-release // ignores ctx, as a stuck placer would
		placerErr <- ctx.Err()
	}), func(c *Config) { c.RequestTimeout = 100 * time.Millisecond })
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	r.WaitPlugin()

	if err := r.StartContainer(testPod(), testContainer("app", 1, api.ContainerState_CONTAINER_CREATED)); err != nil {
		t.Fatalf("the runtime's StartContainer: %v", err)
	}
	answers := r.Answers(api.Event_START_CONTAINER.PrettyName())
	if len(answers) != 1 || answers[0].Err != nil {
		t.Fatalf("the runtime's record of StartContainer = %+v, want one success (an answer, not its timeout)", answers)
	}
	if s := p.Stats(); s.Late != 1 || s.LateRunning != 1 {
		t.Errorf("Stats() with the placer still blocked = %+v, want Late 1, LateRunning 1", s)
	}
	if !p.Connected() || r.Plugins() != 1 {
		t.Errorf("after the late placer: Connected %v, runtime's plugins %d; want true, 1", p.Connected(), r.Plugins())
	}

	close(release)
	select {
	case err := <-placerErr:
		if err == nil {
			t.Error("the late placer's ctx was not done")
		}
	case <-time.After(wait):
		t.Fatal("the placer did not return")
	}
	poll.True(t, wait, "LateRunning drops to 0", func() bool { return p.Stats().LateRunning == 0 })
}

// 3b. A placer that panics takes neither the agent down nor the runtime's answer: the
// plugin answers success, counts the panic, stays connected and handles the next start.
func TestPanickingPlacerIsContained(t *testing.T) {
	r := nriruntime.Start(t)
	calls := make(chan struct{}, 2)
	p := startPlugin(t, r.Socket, placerFunc(func(context.Context, Start) {
		calls <- struct{}{}
		panic("a bug in the placer")
	}))
	r.WaitPlugin()
	for i := range 2 {
		if err := r.StartContainer(testPod(), testContainer(fmt.Sprintf("app-%d", i), 1, api.ContainerState_CONTAINER_CREATED)); err != nil {
			t.Fatalf("start %d: the runtime's StartContainer: %v", i, err)
		}
		<-calls
	}
	answers := r.Answers(api.Event_START_CONTAINER.PrettyName())
	if len(answers) != 2 || answers[0].Err != nil || answers[1].Err != nil {
		t.Fatalf("the runtime's record of StartContainer = %+v, want two successes", answers)
	}
	poll.True(t, wait, "both panics counted", func() bool { return p.Stats().Panics == 2 })
	if !p.Connected() || r.Plugins() != 1 {
		t.Errorf("after the panics: Connected %v, runtime's plugins %d; want true, 1", p.Connected(), r.Plugins())
	}
}

// 4. The runtime restarts: the plugin sees the connection go, connects to the new runtime
// on the same socket, and handles its StartContainer.
func TestReconnectsAfterRuntimeRestart(t *testing.T) {
	r := nriruntime.Start(t)
	got := make(placements, 4)
	p := startPlugin(t, r.Socket, got)
	poll.True(t, wait, "the plugin connects", p.Connected)
	changed(t, p, "connected")
	r.WaitPlugin()

	r.Stop()
	poll.True(t, wait, "the plugin sees the runtime go", func() bool { return !p.Connected() })
	changed(t, p, "disconnected")
	r.Start()
	poll.True(t, wait, "the plugin connects again", p.Connected)
	changed(t, p, "connected again")
	r.WaitPlugin()

	if err := r.StartContainer(testPod(), testContainer("after", 5, api.ContainerState_CONTAINER_CREATED)); err != nil {
		t.Fatalf("the new runtime's StartContainer: %v", err)
	}
	if diff := cmp.Diff(wantStart("after", 5, false), got.next(t)); diff != "" {
		t.Errorf("the placer's Start (-want +got):\n%s", diff)
	}
	if s := p.Stats(); s.Connects != 2 || s.Disconnects != 1 {
		t.Errorf("Stats() = %+v, want 2 connects, 1 disconnect", s)
	}
}

// 5. No socket at Start: Start keeps trying without an error, and connects once the
// runtime appears.
func TestWaitsForAbsentSocket(t *testing.T) {
	r := nriruntime.New(t)
	p := startPlugin(t, r.Socket, make(placements))
	poll.True(t, wait, "the plugin tries again", func() bool { return p.Stats().DialFailures >= 3 })
	select {
	case err := <-p.done:
		t.Fatalf("Start returned %v while the socket was absent", err)
	default:
	}
	if p.Connected() {
		t.Error("Connected with no runtime")
	}

	r.Start()
	poll.True(t, wait, "the plugin connects", p.Connected)
	r.WaitPlugin()
}

// 6. Synchronize at registration hands the running containers to the placer, with
// Running, and asks the runtime for no update.
func TestSynchronizePassesRunning(t *testing.T) {
	r := nriruntime.New(t)
	r.Running([]*api.PodSandbox{testPod()}, []*api.Container{
		testContainer("created", 0, api.ContainerState_CONTAINER_CREATED),
		testContainer("running", 10, api.ContainerState_CONTAINER_RUNNING),
		testContainer("stopped", 0, api.ContainerState_CONTAINER_STOPPED),
	})
	r.Start()
	got := make(placements, 4)
	p := startPlugin(t, r.Socket, got)
	if diff := cmp.Diff(wantStart("running", 10, true), got.next(t)); diff != "" {
		t.Errorf("the placer's Start (-want +got):\n%s", diff)
	}
	r.WaitPlugin()
	poll.True(t, wait, "Stats counts the synced container", func() bool { return p.Stats().Synced == 1 })
	select {
	case s := <-got:
		t.Errorf("a second container was placed: %+v", s)
	default:
	}
	answers := r.Answers("Synchronize")
	if len(answers) != 1 || answers[0].Err != nil {
		t.Errorf("the runtime's record of Synchronize = %+v, want one success", answers)
	}
}

// 7. Start returns nil once its ctx ends, connected or waiting for the socket.
func TestStartReturnsOnCancel(t *testing.T) {
	t.Run("connected", func(t *testing.T) {
		r := nriruntime.Start(t)
		p := startPlugin(t, r.Socket, make(placements))
		poll.True(t, wait, "the plugin connects", p.Connected)
		if err := p.stop(t); err != nil {
			t.Errorf("Start = %v, want nil", err)
		}
		poll.True(t, wait, "the runtime drops the plugin", func() bool {
			_ = r.StartContainer(testPod(), testContainer("x", 1, api.ContainerState_CONTAINER_CREATED)) // prunes closed plugins
			return r.Plugins() == 0
		})
	})
	t.Run("no socket", func(t *testing.T) {
		p := startPlugin(t, nriruntime.New(t).Socket, make(placements), func(c *Config) {
			c.MinBackoff, c.MaxBackoff = time.Hour, time.Hour // Start is waiting out its backoff
		})
		poll.True(t, wait, "the plugin failed to dial", func() bool { return p.Stats().DialFailures == 1 })
		if err := p.stop(t); err != nil {
			t.Errorf("Start = %v, want nil", err)
		}
	})
}

// BenchmarkStartContainer is the runtime's StartContainer with the plugin and a placer
// that does nothing: the round trip through the socket, without the tests' proxy.
func BenchmarkStartContainer(b *testing.B) {
	r := nriruntime.Start(b)
	got := make(placements, 1)
	startPlugin(b, r.Direct, got)
	r.WaitPlugin()
	pod, ctr := testPod(), testContainer("app", 1, api.ContainerState_CONTAINER_CREATED)
	for b.Loop() {
		if err := r.StartContainer(pod, ctr); err != nil {
			b.Fatal(err)
		}
		<-got
	}
}

// A runtime that goes away between accepting the plugin's registration and configuring it
// leaves the library's stub waiting, under its own lock, for a configuration that never
// comes. The plugin abandons that stub and connects to the next runtime.
func TestRuntimeGoneBeforeConfigure(t *testing.T) {
	r := nriruntime.New(t)
	l, err := net.Listen("unix", r.Socket)
	if err != nil {
		t.Fatal(err)
	}
	go dieAfterRegistration(l)

	p := startPlugin(t, r.Socket, make(placements), func(c *Config) { c.stuckGrace = 200 * time.Millisecond })
	// The stub gets stuck only when its ttrpc client takes the reply before it sees the
	// connection close; otherwise its registration fails and the plugin tries again.
	poll.True(t, wait, "the plugin abandons a stuck stub", func() bool { return p.Stats().Abandoned >= 1 })
	_ = l.Close()

	r.Start()
	poll.True(t, wait, "the plugin connects to the next runtime", p.Connected)
	r.WaitPlugin()
}

// dieAfterRegistration accepts plugins on l until it is closed, answers each one's
// RegisterPlugin and closes its connection right after writing the answer: before the
// runtime's Configure.
func dieAfterRegistration(l net.Listener) {
	for {
		sock, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			c := &closeAfterReply{Conn: sock}
			mux := multiplex.Multiplex(c)
			rpcl, err := mux.Listen(multiplex.RuntimeServiceConn)
			if err != nil {
				_ = sock.Close()
				return
			}
			srv, err := ttrpc.NewServer()
			if err != nil {
				_ = sock.Close()
				return
			}
			api.RegisterRuntimeService(srv, registerOnly{c})
			_ = srv.Serve(context.Background(), rpcl)
		}()
	}
}

// closeAfterReply closes its connection once the reply to RegisterPlugin is written: the
// multiplexer writes a frame's header and its payload separately.
type closeAfterReply struct {
	net.Conn
	replying atomic.Bool
	writes   atomic.Int32
}

func (c *closeAfterReply) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	if c.replying.Load() && c.writes.Add(1) == 2 {
		_ = c.Conn.Close()
	}
	return n, err
}

// registerOnly is a runtime service that accepts a registration and does nothing else.
type registerOnly struct{ c *closeAfterReply }

func (s registerOnly) RegisterPlugin(context.Context, *api.RegisterPluginRequest) (*api.Empty, error) {
	s.c.replying.Store(true)
	return &api.Empty{}, nil
}

func (registerOnly) UpdateContainers(context.Context, *api.UpdateContainersRequest) (*api.UpdateContainersResponse, error) {
	return &api.UpdateContainersResponse{}, nil
}

// changed waits for the plugin's Changes to signal what, and fails if none comes.
func changed(t *testing.T, p *runningPlugin, what string) {
	t.Helper()
	select {
	case <-p.Changes():
	case <-time.After(wait):
		t.Fatalf("no change signalled when the plugin %s", what)
	}
}
