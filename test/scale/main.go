// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

// Command scale measures what NumaPreference reporting costs the apiserver and its
// watchers at N nodes, on a real kube-apiserver that already has the project's CRDs
// (KUBECONFIG; hack/scale.sh starts a throwaway one).
//
//	go run ./test/scale -nodes N -pods-per-node P [-mode agents|reports] [-design new|legacy]
//
// design new, mode agents (the default) runs N simulated node agents in this process, each
// with the agent's real controller and reporting code (controllers.SetupNodeAgent,
// NodeCacheOptions), its own manager, cache and connection, node name node-<i> and a stub
// engine that reports its P pods Applied; the real summarizer (controllers.SetupSummary)
// runs beside them in a manager of its own. Mode reports, for N whose managers do not fit
// in memory, lets report objects stand in for the agents: the harness server-side-applies
// each node's NumaNodeReport itself (as the agent would, checked against a real agent's in
// agents mode) and holds, per node, the two watches an agent's cache opens on
// NumaPreferences and on its own report; the summarizer is the real one.
//
// design legacy reproduces the previous design on a copy of its CRD under
// legacy.numapref.io: N cluster-wide watches and N appliers each server-side-applying
// its own entry of status.nodes[] (field manager numapref-agent/<node>, forced, status
// subresource).
//
// Phases: setup (not measured) creates the Nodes, pods and NumaPreference; rollout starts
// the agents (or writes every report or entry once) and ends when status.summary counts
// every node; churn changes every node's task count once and ends when the summary shows
// it; quiet watches one more minute for writes. Writes and watch bytes are the deltas of
// the apiserver's own /metrics over each phase (apiserver_request_total,
// apiserver_watch_events_sizes_sum and _count); lease writes (the apiserver's heartbeat)
// are left out. It prints one line of figures and exits 1 when the summary does not
// converge within -timeout.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.uber.org/zap/zapcore"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
)

type options struct {
	nodes, podsPerNode, workers int
	design, mode                string
	tasks                       int
	reportInterval              time.Duration
	timeout, quiet, settle      time.Duration
	namespace                   string
	showObjects                 bool
}

func (o *options) register(fs *flag.FlagSet) {
	fs.IntVar(&o.nodes, "nodes", 100, "simulated nodes (node-0 ... node-<N-1>)")
	fs.IntVar(&o.podsPerNode, "pods-per-node", 2, "selected pods on every node, one container each")
	fs.StringVar(&o.design, "design", "new", "new (a NumaNodeReport per node, the summarizer) or legacy (status.nodes[] entries)")
	fs.StringVar(&o.mode, "mode", "agents", "design new: agents (N managers with the real agent code) or reports (report objects stand in for agents)")
	fs.IntVar(&o.tasks, "tasks", 3, "tasks per container; the churn round adds one on every node")
	fs.DurationVar(&o.reportInterval, "report-interval", 5*time.Second, "the agents' NodeAgentOptions.ReportInterval (the agent's default)")
	fs.IntVar(&o.workers, "writers", 16, "requests in parallel for setup, and for the stand-in and legacy writes")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Minute, "how long each phase may take to converge")
	fs.DurationVar(&o.quiet, "quiet", time.Minute, "the steady-state window after the churn round; 0 skips it")
	fs.DurationVar(&o.settle, "settle", 2*time.Second, "how long the apiserver's write and watch counters must stay unchanged after a phase converged before its closing scrape (the last events reach the watchers after their writes)")
	fs.StringVar(&o.namespace, "namespace", "numapref-scale", "namespace of the pods and the NumaPreference")
	fs.BoolVar(&o.showObjects, "show-objects", false, "log the NumaPreference and node-0's report as the watchers receive them")
}

func (o *options) check() error {
	switch {
	case o.nodes < 1 || o.podsPerNode < 1 || o.workers < 1 || o.tasks < 1:
		return errors.New("-nodes, -pods-per-node, -writers and -tasks must be at least 1")
	case o.design != "new" && o.design != "legacy":
		return fmt.Errorf("-design must be new or legacy, not %q", o.design)
	case o.design == "new" && o.mode != "agents" && o.mode != "reports":
		return fmt.Errorf("-mode must be agents or reports, not %q", o.mode)
	}
	if o.design == "legacy" {
		o.mode = "appliers"
	}
	return nil
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "scale: "+format+"\n", args...)
}

func main() {
	var o options
	o.register(flag.CommandLine)
	flag.Parse()
	if err := o.check(); err != nil {
		fmt.Fprintln(os.Stderr, "scale:", err)
		os.Exit(2)
	}
	ctrl.SetLogger(zap.New(zap.Level(zapcore.ErrorLevel)))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := run(ctx, &o)
	if res != nil {
		fmt.Println(res.line())
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "scale:", err)
		os.Exit(1)
	}
}

// phase is what one measured phase cost.
type phase struct {
	name string
	took time.Duration
	api  apiCounters
}

// result is what the harness prints.
type result struct {
	o              *options
	phases         []phase
	clientFailures int64
	largest        int
	largestName    string
	apiserverRSS   float64 // the most process_resident_memory_bytes seen
	standIn        string  // agents mode: whether the stand-in report matches a real one
	converged      bool
	watchReopens   int64
}

// harness holds the connections and what runs.
type harness struct {
	o       *options
	cfg     *rest.Config
	scheme  *runtime.Scheme
	world   *world
	raw     *rawAPI
	metrics rest.Interface
	res     *result
	mu      sync.Mutex
}

func newHarness(o *options) (*harness, error) {
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(clientcmd.NewDefaultClientConfigLoadingRules(), nil).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("loading the kubeconfig: %w", err)
	}
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(numav1.AddToScheme(scheme))
	// The harness's own requests (setup, stand-ins, polls) are not rate limited.
	own := rest.CopyConfig(cfg)
	own.QPS, own.Burst = -1, 0
	c, err := client.New(own, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("making a client: %w", err)
	}
	cs, err := kubernetes.NewForConfig(own)
	if err != nil {
		return nil, err
	}
	raw, err := newRawAPI(own)
	if err != nil {
		return nil, err
	}
	w := &world{c: c, namespace: o.namespace, preference: "scale", nodes: o.nodes, podsPerNode: o.podsPerNode, workers: o.workers}
	return &harness{o: o, cfg: cfg, scheme: scheme, world: w, raw: raw, metrics: cs.Discovery().RESTClient(), res: &result{o: o}}, nil
}

// scrape reads the apiserver's counters and keeps the largest RSS seen.
func (h *harness) scrape(ctx context.Context) (apiCounters, error) {
	c, err := scrapeAPIServer(ctx, h.metrics)
	if err == nil {
		h.mu.Lock()
		h.res.apiserverRSS = max(h.res.apiserverRSS, c.rssBytes)
		h.mu.Unlock()
	}
	return c, err
}

// sampleRSS scrapes every 10 s until ctx ends, for the apiserver's RSS.
func (h *harness) sampleRSS(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(10 * time.Second):
			_, _ = h.scrape(ctx)
		}
	}
}

// settled scrapes every half second until the writes and watch traffic have not moved for
// o.settle, and returns that scrape; counters still moving after o.timeout are an error.
func (h *harness) settled(ctx context.Context) (apiCounters, error) {
	start := time.Now()
	last, err := h.scrape(ctx)
	for quietSince := time.Now(); err == nil && time.Since(quietSince) < h.o.settle; {
		if time.Since(start) > h.o.timeout {
			return last, fmt.Errorf("the apiserver's write and watch counters still moved %s after the phase ended", h.o.timeout)
		}
		select {
		case <-ctx.Done():
			return last, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
		var c apiCounters
		if c, err = h.scrape(ctx); err == nil {
			d := c.since(last)
			writes, _ := d.writes()
			if bytes, events := d.watched(); writes+bytes+events > 0 {
				quietSince = time.Now()
			}
			last = c
		}
	}
	if err == nil {
		logf("counters settled %s after the phase ended", time.Since(start).Round(100*time.Millisecond))
	}
	return last, err
}

// measure runs one phase between two scrapes of the apiserver's counters.
func (h *harness) measure(ctx context.Context, name string, run func(context.Context) error) error {
	before, err := h.scrape(ctx)
	if err != nil {
		return err
	}
	start := time.Now()
	logf("%s: start", name)
	runErr := run(ctx)
	took := time.Since(start)
	var after apiCounters
	if runErr == nil {
		after, err = h.settled(ctx)
	} else {
		after, err = h.scrape(ctx)
	}
	if err != nil {
		return errors.Join(runErr, err)
	}
	p := phase{name: name, took: took, api: after.since(before)}
	h.res.phases = append(h.res.phases, p)
	writes, failed := p.api.writes()
	bytes, events := p.api.watched()
	logf("%s: %s, %d writes (%d failed), %d B to watchers in %d events; %s", name, took.Round(time.Millisecond), writes, failed, bytes, events, p.api.breakdown())
	return runErr
}

func run(ctx context.Context, o *options) (*result, error) {
	h, err := newHarness(o)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go h.sampleRSS(ctx)
	var err2 error
	switch o.design {
	case "legacy":
		err2 = h.runLegacy(ctx)
	default:
		err2 = h.runNew(ctx)
	}
	return h.res, err2
}

// setup creates what every new-design mode needs, unmeasured.
func (h *harness) setup(ctx context.Context, pods bool) error {
	w := h.world
	start := time.Now()
	if err := w.createNamespace(ctx); err != nil {
		return err
	}
	if err := w.createNodes(ctx); err != nil {
		return err
	}
	if !pods {
		logf("setup: %d nodes in %s", w.nodes, time.Since(start).Round(time.Millisecond))
		return nil
	}
	if err := w.createPods(ctx); err != nil {
		return err
	}
	logf("setup: %d nodes, %d pods in %s", w.nodes, w.nodes*w.podsPerNode, time.Since(start).Round(time.Millisecond))
	return nil
}

func (h *harness) wantSummary(tasks int32) numav1.Summary {
	pods := int32(h.o.nodes * h.o.podsPerNode)
	return numav1.Summary{Nodes: int32(h.o.nodes), Pods: pods, Containers: pods, Tasks: pods * tasks}
}

func (h *harness) runNew(ctx context.Context) error { //nolint:funlen // measurement tooling: the scale run's phases in order
	o, w := h.o, h.world
	agents := o.mode == "agents"
	if err := h.setup(ctx, agents); err != nil {
		return err
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	mctx, stopManagers := context.WithCancel(ctx)
	defer stopManagers()
	errs := make(chan error, 1)
	if err := w.createPreference(ctx); err != nil {
		return err
	}
	// The summarizer is up once it has written the empty preference's status.
	if err := startSummarizer(mctx, &wg, h.cfg, h.scheme, errs); err != nil {
		return err
	}
	pref, err := w.getPreference(ctx)
	if err != nil {
		return err
	}
	if err := w.waitSummary(ctx, o.timeout, numav1.Summary{}); err != nil {
		return fmt.Errorf("the summarizer did not start: %w", err)
	}
	var failures atomic.Int64
	defer func() { h.res.clientFailures = failures.Load() }()
	wc := &watchCounter{api: h.raw}
	if !agents {
		start := time.Now()
		if err := w.standInWatches(mctx, wc); err != nil {
			return err
		}
		logf("setup: %d stand-in watches open in %s", wc.open.Load(), time.Since(start).Round(time.Millisecond))
	}
	tasks := int32(o.tasks)
	var engines []*stubEngine
	converge := func(tasks int32) func(context.Context) error {
		return func(ctx context.Context) error {
			done := make(chan error, 1)
			go func() { done <- w.waitSummary(ctx, o.timeout, h.wantSummary(tasks)) }()
			select {
			case err := <-done:
				return err
			case err := <-errs:
				return err
			}
		}
	}
	err = h.measure(ctx, "rollout", func(ctx context.Context) error {
		if agents {
			var err error
			if engines, err = startAgents(mctx, &wg, h.cfg, h.scheme, o.nodes, tasks, o.reportInterval, errs); err != nil {
				return err
			}
		} else if err := w.applyReports(ctx, pref.Generation, tasks, &failures); err != nil {
			return err
		}
		return converge(tasks)(ctx)
	})
	if err != nil {
		return err
	}
	if agents {
		h.res.standIn = "matches"
		if err := w.checkStandIn(ctx, pref.Generation, tasks); err != nil {
			h.res.standIn = "differs"
			logf("stand-in report: %v", err)
		}
	}
	tasks++
	err = h.measure(ctx, "churn", func(ctx context.Context) error {
		if agents {
			for _, e := range engines {
				e.setTasks(tasks)
			}
		} else if err := w.applyReports(ctx, pref.Generation, tasks, &failures); err != nil {
			return err
		}
		return converge(tasks)(ctx)
	})
	if err != nil {
		return err
	}
	h.res.converged = true
	if h.res.largest, h.res.largestName, err = w.largestObject(ctx, h.raw); err != nil {
		return err
	}
	if o.showObjects {
		for _, path := range []string{
			fmt.Sprintf("/apis/%s/namespaces/%s/numapreferences/%s", numav1.GroupVersion, w.namespace, w.preference),
			fmt.Sprintf("/apis/%s/numanodereports/%s", numav1.GroupVersion, nodeName(0)),
		} {
			raw, err := h.raw.getRaw(ctx, path)
			logf("%s (%d B, err %v): %s", path, len(raw), err, raw)
		}
	}
	if err := h.quiet(ctx); err != nil {
		return err
	}
	h.res.watchReopens = wc.reopened.Load()
	return nil
}

// quiet measures the steady state: nothing changes, so nothing should be written.
func (h *harness) quiet(ctx context.Context) error {
	if h.o.quiet <= 0 {
		return nil
	}
	return h.measure(ctx, "quiet", func(ctx context.Context) error {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(h.o.quiet):
			return nil
		}
	})
}

func (h *harness) runLegacy(ctx context.Context) error {
	o, w := h.o, h.world
	if err := w.installLegacyCRD(ctx, o.timeout); err != nil {
		return err
	}
	if err := w.createNamespace(ctx); err != nil {
		return err
	}
	if err := w.createLegacyPreference(ctx); err != nil {
		return err
	}
	wctx, stopWatches := context.WithCancel(ctx)
	defer stopWatches()
	wc := &watchCounter{api: h.raw}
	path := "/apis/" + legacyGV.String() + "/numapreferences"
	paths := make([]string, o.nodes)
	for i := range paths {
		paths[i] = path
	}
	start := time.Now()
	if err := wc.startWatches(wctx, o.workers, paths, make([]url.Values, o.nodes)); err != nil {
		return err
	}
	logf("setup: %d cluster-wide watches open in %s", wc.open.Load(), time.Since(start).Round(time.Millisecond))
	var failures atomic.Int64
	defer func() { h.res.clientFailures = failures.Load() }()
	tasks := int32(o.tasks)
	round := func(tasks int32) func(context.Context) error {
		return func(ctx context.Context) error {
			if err := w.applyLegacyEntries(ctx, tasks, &failures); err != nil {
				return err
			}
			return w.waitLegacyEntries(ctx, o.timeout, tasks)
		}
	}
	if err := h.measure(ctx, "rollout", round(tasks)); err != nil {
		return err
	}
	if err := h.measure(ctx, "churn", round(tasks+1)); err != nil {
		return err
	}
	h.res.converged = true
	size, err := w.legacyObjectSize(ctx, h.raw)
	if err != nil {
		return err
	}
	h.res.largest, h.res.largestName = size, "numapreference.legacy/"+w.preference
	h.res.watchReopens = wc.reopened.Load()
	return h.quiet(ctx)
}

// line is the harness's one line of figures.
func (r *result) line() string { //nolint:funlen // measurement tooling: one figure per column of the harness's line
	var rollout, churn, quiet *phase
	for i := range r.phases {
		switch r.phases[i].name {
		case "rollout":
			rollout = &r.phases[i]
		case "churn":
			churn = &r.phases[i]
		case "quiet":
			quiet = &r.phases[i]
		}
	}
	f := []string{"design=" + r.o.design, "mode=" + r.o.mode, fmt.Sprintf("nodes=%d", r.o.nodes), fmt.Sprintf("pods-per-node=%d", r.o.podsPerNode)}
	var writes, failed, bytes int64
	var cpu float64
	var took time.Duration
	for _, p := range []*phase{rollout, churn} {
		if p == nil {
			continue
		}
		w, fl := p.api.writes()
		b, _ := p.api.watched()
		writes, failed, bytes, cpu, took = writes+w, failed+fl, bytes+b, cpu+p.api.cpuSeconds, took+p.took
	}
	// A refused write counts in the apiserver's failed writes, and again in the harness's
	// errors if it was the harness's (stand-ins, legacy appliers), with errors the
	// apiserver never saw.
	f = append(f, fmt.Sprintf("writes=%d", writes), fmt.Sprintf("failed-writes=%d", failed),
		fmt.Sprintf("client-errors=%d", r.clientFailures), fmt.Sprintf("watch-bytes=%d", bytes))
	if churn != nil {
		b, _ := churn.api.watched()
		f = append(f, fmt.Sprintf("bytes-per-node-change=%d", b/int64(r.o.nodes)))
	}
	f = append(f, fmt.Sprintf("largest-object=%dB(%s)", r.largest, r.largestName), fmt.Sprintf("converged=%t", r.converged))
	for _, p := range []*phase{rollout, churn} {
		if p == nil {
			continue
		}
		w, _ := p.api.writes()
		b, _ := p.api.watched()
		f = append(f, fmt.Sprintf("%s=%s/%dw/%dB", p.name, p.took.Round(100*time.Millisecond), w, b))
	}
	// The NumaPreference's status writes: the summarizer's (legacy: the appliers').
	var status []string
	for _, p := range []*phase{rollout, churn} {
		if p != nil {
			var n int64
			for res, w := range p.api.writesBy() {
				if strings.HasPrefix(res, "numapreferences/status.") {
					n += w
				}
			}
			status = append(status, fmt.Sprint(n))
		}
	}
	f = append(f, "status-writes="+strings.Join(status, "/"))
	if quiet != nil {
		w, _ := quiet.api.writes()
		f = append(f, fmt.Sprintf("quiet-writes=%d/%s", w, quiet.took.Round(time.Second)))
	}
	if r.standIn != "" {
		f = append(f, "stand-in-report="+r.standIn)
	}
	if r.watchReopens > 0 {
		f = append(f, fmt.Sprintf("watch-reopens=%d", r.watchReopens))
	}
	f = append(f, fmt.Sprintf("converge=%s", took.Round(100*time.Millisecond)),
		"harness-peak-rss="+peakRSS(), fmt.Sprintf("apiserver-rss=%.0fMiB", r.apiserverRSS/(1<<20)),
		fmt.Sprintf("apiserver-cpu=%.1fs", cpu))
	return strings.Join(f, " ")
}

// peakRSS is this process's VmHWM.
func peakRSS() string {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return "?"
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			var kb int64
			_, _ = fmt.Sscan(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), &kb)
			return fmt.Sprintf("%dMiB", kb/1024)
		}
	}
	return "?"
}
