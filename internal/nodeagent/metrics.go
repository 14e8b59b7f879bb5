package nodeagent

import (
	"errors"
	"os"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/internal/nodeagent/desire"
	"github.com/numapref/numapref/internal/nodeagent/plan"
	"github.com/numapref/numapref/internal/numa"
)

// Metrics are the engine's Prometheus metrics. Labels are bounded: reasons are the API's
// fixed set, never pod or task names.
type Metrics struct {
	sets        *prometheus.CounterVec
	restores    prometheus.Counter
	containers  *prometheus.GaugeVec
	tasks       prometheus.Gauge
	passSeconds *prometheus.HistogramVec
	kernel      *prometheus.GaugeVec
	taskStates  *prometheus.GaugeVec
	balancing   *prometheus.GaugeVec
	forkLag     *prometheus.HistogramVec
	forkStages  *prometheus.HistogramVec
	// startToPlaced is numapref_start_to_placed_seconds, by PlacedAtStart or PlacedAtAfterStart.
	startToPlaced *prometheus.HistogramVec
	ledgerErrs    prometheus.Counter
	desiredErrs   prometheus.Counter
	// ledgerDamaged is 1 once the ledger read at start was damaged (ledger.ErrDamaged).
	ledgerDamaged prometheus.Gauge
}

// Values of the since label of numapref_fork_apply_lag_seconds.
const (
	lagSinceEvent   = "event"
	lagSinceArrival = "arrival"
)

// Values of the mode label of numapref_numa_balancing besides numa.BalancingMode.Label's.
const (
	balancingUnavailable = "unavailable" // the kernel has no NUMA balancing (no sysctl)
	balancingUnreadable  = "unreadable"  // the sysctl could not be read or parsed
)

// forkLagBuckets are the buckets of the fork lag and its stages: 50 µs to 1.6 s by factors
// of 2, fine enough to tell a 2 ms p99 (the goal) from a 3 ms one, which factors of 4
// (0.8, 3.2 ms) could not.
var forkLagBuckets = prometheus.ExponentialBuckets(0.00005, 2, 16)

// The help texts of the engine's metrics, as dashboards and alerts know them.
const (
	helpSets = "Preferred-node SETs the agent issued, by result (Applied, PermissionDenied, KernelError; raced: the task " +
		"exited or left its container around the SET, which may have hit another task: a pass's is put back, an undo's is not)."
	helpRestores   = "Tasks whose value the agent put back when their container was no longer selected."
	helpContainers = "Selected containers on this node by state (Applied or the reason they are skipped) and, for Applied ones, the NUMA node they prefer."
	helpTasks      = "Tasks of selected containers that have their preferred node."
	helpPass       = "Duration of engine passes: full (every container: rescans and desired-state changes), fork (one container, on a fork event) or start (one container the runtime is starting, through NRI)."
	helpKernel     = "1 when the agent's kernel backend can set preferred nodes, by backend."
	helpTaskStates = "Tasks of selected containers after the last full pass, by reason: Applied (have the preferred node), " +
		"PermissionDenied or KernelError (the kernel refused), MemoryPinnedElsewhere (the container was skipped). " +
		"Containers skipped before their tasks are read (e.g. KernelUnsupported, NodeNotPresent) count in numapref_containers only."
	helpBalancing = "1 for the kernel.numa_balancing mode of this node (disabled, normal, memory-tiering, normal-memory-tiering; " +
		"unavailable without the sysctl, unreadable when it cannot be read). Read at start and on every full pass."
	helpForkLag = "Time from a fork event to the return of the SET that gives the new task its preferred node, for tasks " +
		"set by a fork-event pass (their own event's, or an earlier event's that listed them first; tasks a full pass " +
		"sets are not observed). since=event: from the kernel's timestamp of the event (CLOCK_MONOTONIC at fork, " +
		"so it includes the wait in the socket and behind other passes); since=arrival: from the event's arrival in " +
		"the engine, for events without a usable timestamp (own pass only)."
	helpForkStages = "The parts of numapref_fork_apply_lag_seconds, for tasks set by their own fork event's pass: deliver (in the " +
		"proc connector's socket until the engine read the event; 0 without a kernel timestamp), wait (behind other " +
		"passes), retry (until a pass listed the task in its cgroup: the kernel sends the event before it moves the " +
		"child there), plan (listing the container, reading its new tasks), writeahead (the ledger's fsync'd record), " +
		"set (the bracketed SET). A fork's stages add up to its lag since the event."
	helpStartToPlaced = "Time from a container's start to its first preferred-node SET by this agent, observed once per " +
		"container (again if it is undone and placed anew, or restarts). at=Start: set by a start pass (the " +
		"runtime's NRI StartContainer) before its first instruction, observed as 0. at=AfterStart: set by any " +
		"other pass (the API's pod status, a fork event, a rescan), from the earliest start time of the tasks " +
		"set (/proc starttime, CLOCK_BOOTTIME) to the SETs' return; containers that started before this agent " +
		"are not observed."
	helpLedgerErrs = "Failed writes of the agent's ledger (disk full or read-only, past its size bound, a link in its place). " +
		"A failed write ahead of SETs skips them: their containers report LedgerError, and a pass retries soon."
	helpDesiredErrs = "Failed writes of the persisted desired state (desired.json beside the ledger), which an agent restarted " +
		"while the API is unreachable enforces. Placement goes on; the next pass writes again."
	helpLedgerDamaged = "1 when the ledger this agent read at start was damaged (unreadable, past its bound, unparsable or failing " +
		"its checksum): what it recorded is lost, so values set before may never be undone. Stays 1 until the agent restarts."
)

// NewMetrics makes the engine's metrics; Register exposes them.
func NewMetrics() *Metrics {
	return &Metrics{
		sets:          counterVec("task_sets_total", helpSets, "result"),
		restores:      counter("task_restores_total", helpRestores),
		containers:    gaugeVec("containers", helpContainers, "reason", "numa_node"),
		tasks:         prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "numapref", Name: "managed_tasks", Help: helpTasks}),
		passSeconds:   histogramVec("pass_duration_seconds", helpPass, prometheus.ExponentialBuckets(0.0001, 4, 10), "kind"),
		kernel:        gaugeVec("kernel_supported", helpKernel, "backend"),
		taskStates:    gaugeVec("tasks", helpTaskStates, "reason"),
		balancing:     gaugeVec("numa_balancing", helpBalancing, "mode"),
		forkLag:       histogramVec("fork_apply_lag_seconds", helpForkLag, forkLagBuckets, "since"),
		forkStages:    histogramVec("fork_apply_stage_seconds", helpForkStages, forkLagBuckets, "stage"),
		startToPlaced: histogramVec("start_to_placed_seconds", helpStartToPlaced, prometheus.ExponentialBuckets(0.001, 2, 16), "at"), // 1 ms to 33 s
		ledgerErrs:    counter("ledger_write_errors_total", helpLedgerErrs),
		desiredErrs:   counter("desired_state_write_errors_total", helpDesiredErrs),
		ledgerDamaged: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "numapref", Name: "ledger_damaged", Help: helpLedgerDamaged}),
	}
}

func counter(name, help string) prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{Namespace: "numapref", Name: name, Help: help})
}

func counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "numapref", Name: name, Help: help}, labels)
}

func gaugeVec(name, help string, labels ...string) *prometheus.GaugeVec {
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "numapref", Name: name, Help: help}, labels)
}

func histogramVec(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "numapref", Name: name, Help: help, Buckets: buckets}, labels)
}

// Register adds the metrics to reg.
func (m *Metrics) Register(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{m.sets, m.restores, m.containers, m.tasks, m.passSeconds, m.kernel, m.taskStates, m.balancing, m.forkLag, m.forkStages, m.startToPlaced, m.ledgerErrs, m.desiredErrs, m.ledgerDamaged} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

func (m *Metrics) reportPass(kind string, d time.Duration) {
	m.passSeconds.WithLabelValues(kind).Observe(d.Seconds())
}

func (m *Metrics) reportSet(result string) { m.sets.WithLabelValues(result).Inc() }

func (m *Metrics) reportLedgerDamaged() { m.ledgerDamaged.Set(1) }

func (m *Metrics) reportRestore() { m.restores.Inc() }

func (m *Metrics) reportLedgerError() { m.ledgerErrs.Inc() }

func (m *Metrics) reportDesiredError() { m.desiredErrs.Inc() }

// reportForkLag observes the lag from fork's event to the SET of its task. ownPass says
// the SET was made by the pass for this very event (else by an earlier event's pass,
// before this event arrived: only the kernel's timestamp measures that).
func (m *Metrics) reportForkLag(f *forkMark, set setMark, ownPass bool) {
	switch {
	case f.kernelNs != 0 && set.mono >= f.kernelNs:
		m.forkLag.WithLabelValues(lagSinceEvent).Observe(float64(set.mono-f.kernelNs) / 1e9)
	case ownPass:
		m.forkLag.WithLabelValues(lagSinceArrival).Observe(set.at.Sub(f.arrival).Seconds())
	}
	if !ownPass {
		return
	}
	if d, ok := f.stages(set); ok {
		for i, stage := range forkStageNames {
			m.forkStages.WithLabelValues(stage).Observe(d[i].Seconds())
		}
	}
}

// reportStartToPlaced observes the time from a container's start to its first placement,
// which was at (PlacedAtStart or PlacedAtAfterStart).
func (m *Metrics) reportStartToPlaced(at string, d time.Duration) {
	m.startToPlaced.WithLabelValues(at).Observe(d.Seconds())
}

// reportBalancing sets the numa_balancing gauge from procRoot/sys/kernel/numa_balancing.
func (m *Metrics) reportBalancing(procRoot string) {
	mode, err := numa.ReadBalancing(procRoot)
	label := mode.Label()
	switch {
	case errors.Is(err, os.ErrNotExist):
		label = balancingUnavailable
	case err != nil:
		label = balancingUnreadable
	}
	m.balancing.Reset()
	m.balancing.WithLabelValues(label).Set(1)
}

// reportResults sets the gauges from a full pass's results.
func (m *Metrics) reportResults(results map[desire.ContainerKey]plan.Result) {
	m.containers.Reset()
	m.taskStates.Reset()
	tasks := 0
	for _, r := range results {
		node := ""
		if r.Reason == numav1.ReasonApplied {
			node = strconv.Itoa(r.Node)
		}
		m.containers.WithLabelValues(r.Reason, node).Inc()
		tasks += r.Tasks
		for reason, n := range r.Failed {
			m.taskStates.WithLabelValues(reason).Add(float64(n))
		}
		if r.SkippedTasks > 0 {
			m.taskStates.WithLabelValues(r.Reason).Add(float64(r.SkippedTasks))
		}
	}
	m.tasks.Set(float64(tasks))
	m.taskStates.WithLabelValues(numav1.ReasonApplied).Set(float64(tasks))
}

func (m *Metrics) reportKernel(backend string, supported bool) {
	v := 0.0
	if supported {
		v = 1
	}
	m.kernel.WithLabelValues(backend).Set(v)
}
