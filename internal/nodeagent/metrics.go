package nodeagent

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
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
}

// NewMetrics makes the engine's metrics; Register exposes them.
func NewMetrics() *Metrics {
	return &Metrics{
		sets: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "numapref", Name: "task_sets_total",
			Help: "Preferred-node SETs the agent issued, by result (Applied, PermissionDenied, KernelError).",
		}, []string{"result"}),
		restores: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "numapref", Name: "task_restores_total",
			Help: "Tasks whose value the agent put back when their container was no longer selected.",
		}),
		containers: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "numapref", Name: "containers",
			Help: "Selected containers on this node by state: Applied or the reason they are skipped.",
		}, []string{"reason"}),
		tasks: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "numapref", Name: "managed_tasks",
			Help: "Tasks of selected containers that have their preferred node.",
		}),
		passSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "numapref", Name: "pass_duration_seconds",
			Help:    "Duration of engine passes: full (every container: rescans and desired-state changes) or fork (one container, on a fork event).",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10),
		}, []string{"kind"}),
		kernel: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "numapref", Name: "kernel_supported",
			Help: "1 when the agent's kernel backend can set preferred nodes, by backend.",
		}, []string{"backend"}),
	}
}

// Register adds the metrics to reg.
func (m *Metrics) Register(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{m.sets, m.restores, m.containers, m.tasks, m.passSeconds, m.kernel} {
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

func (m *Metrics) reportRestore() { m.restores.Inc() }

// reportResults sets the gauges from a full pass's results.
func (m *Metrics) reportResults(results map[ContainerKey]ContainerResult) {
	m.containers.Reset()
	tasks := 0
	for _, r := range results {
		m.containers.WithLabelValues(r.Reason).Inc()
		tasks += r.Tasks
	}
	m.tasks.Set(float64(tasks))
}

func (m *Metrics) reportKernel(backend string, supported bool) {
	v := 0.0
	if supported {
		v = 1
	}
	m.kernel.WithLabelValues(backend).Set(v)
}
