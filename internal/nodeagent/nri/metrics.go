package nri

import "github.com/prometheus/client_golang/prometheus"

// collector reports a plugin's Stats as the agent's metrics.
type collector struct {
	p                                              *Plugin
	connected, connects, disconnects, starts, late *prometheus.Desc
}

// NewCollector returns the metrics of plugin p: whether it is connected, and its counts.
func NewCollector(p *Plugin) prometheus.Collector {
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc("numapref_nri_"+name, help, nil, nil)
	}
	return &collector{p: p,
		connected:   d("connected", "1 while the agent is registered with the container runtime as an NRI plugin (--nri-socket), else 0."),
		connects:    d("connects_total", "Registrations with the container runtime's NRI that completed (the first, and one after each runtime restart)."),
		disconnects: d("disconnects_total", "NRI connections lost after registration (a runtime restart, or a plugin the runtime dropped)."),
		starts:      d("container_starts_total", "Containers the runtime handed to the agent as it started them (StartContainer)."),
		late:        d("late_placements_total", "Placements at a container's start that had not returned by their deadline: the runtime got its answer without them."),
	}
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.connected, c.connects, c.disconnects, c.starts, c.late} {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	s := c.p.Stats()
	connected := 0.0
	if c.p.Connected() {
		connected = 1
	}
	ch <- prometheus.MustNewConstMetric(c.connected, prometheus.GaugeValue, connected)
	for _, m := range []struct {
		d *prometheus.Desc
		v uint64
	}{{c.connects, s.Connects}, {c.disconnects, s.Disconnects}, {c.starts, s.Starts}, {c.late, s.Late}} {
		ch <- prometheus.MustNewConstMetric(m.d, prometheus.CounterValue, float64(m.v))
	}
}
