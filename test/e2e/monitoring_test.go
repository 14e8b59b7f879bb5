// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/numapref/numapref/internal/testutil/plot"
	"github.com/numapref/numapref/test/monitoring/dashboard"
)

// The monitoring specs: a real Prometheus (Debian's, started here and stopped by pid)
// scrapes the agent of the local node with the configuration the chart's PodMonitor stands
// for, and evaluates numapref's alert rules and dashboard queries; kubectl logs and exec
// reach the agent. The local node's suite only: on kind the nodes' addresses are inside
// Docker's network.
var _ = monitoringSpecs()

func monitoringSpecs() bool {
	if p := os.Getenv("E2E_PROVIDER"); p != "" && p != "local" {
		return false
	}
	return Describe("numapref watched by a real Prometheus", Ordered, Label("monitoring"), func() {
		const (
			mns = "e2e-monitoring"
			job = "numapref-agent"
		)
		var (
			cl    client.Client
			prom  *prometheus
			token string // the scraper's token
			// target is the agent as Prometheus scrapes it: on the node's address here.
			target agentTarget
			caPEM  string
		)

		BeforeAll(func(ctx SpecContext) {
			cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
			Expect(err).NotTo(HaveOccurred())
			cl = newClient(cfg)
			// The agent listens on the node's address, as on a real cluster, where Prometheus
			// dials the pod IP its pod discovery gives (the host network's: the node's).
			installAgent(ctx, "bindAddress=")
			DeferCleanup(func(ctx SpecContext) {
				_, _ = kubectl(ctx, "delete", "namespace", mns, "--wait=true", "--timeout=90s")
				_, _ = kubectl(ctx, "delete", "clusterrolebinding", "e2e-prometheus", "--ignore-not-found")
				uninstallAgent(ctx)
			}, NodeTimeout(3*time.Minute))
			for _, args := range [][]string{
				{"create", "namespace", mns},
				{"create", "serviceaccount", "e2e-prometheus", "-n", mns},
				{"create", "clusterrolebinding", "e2e-prometheus", "--clusterrole=" + release + "-metrics-reader", "--serviceaccount=" + mns + ":e2e-prometheus"},
			} {
				out, err := kubectl(ctx, args...)
				Expect(err).NotTo(HaveOccurred(), out)
			}
			out, err := kubectl(ctx, "create", "token", "e2e-prometheus", "-n", mns, "--duration=1h")
			Expect(err).NotTo(HaveOccurred(), out)
			token = strings.TrimSpace(out)
			caPEM, err = kubectl(ctx, "get", "configmap", "numapref-agent-ca", "-n", agentNamespace, "-o", `go-template={{index .data "ca.crt"}}`)
			Expect(err).NotTo(HaveOccurred(), caPEM)
			// Per-node certificates (the chart's default): no shared name; Prometheus
			// verifies each target's address, which its node's certificate names, as the
			// PodMonitor does.
			verify, err := kubectl(ctx, "get", "configmap", "numapref-agent-ca", "-n", agentNamespace, "-o", `go-template={{.data.verify}}/{{.data.serverName}}`)
			Expect(err).NotTo(HaveOccurred(), verify)
			Expect(verify).To(Equal("node/<no value>"))

			applyPreferenceIn(ctx, mns, "e2e-mon", "node: 0")
			Expect(cl.Create(ctx, workloadPodOn(primaryNode(), mns, "mon-work", map[string]string{"app": "e2e-mon"}, nil, "work"))).To(Succeed())
			containerIDs(ctx, cl, mns, "mon-work")

			Eventually(func() (err error) {
				target, err = findAgentTarget(ctx, cl, primaryNode())
				return err
			}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())
			prom = startPrometheus(ctx, GinkgoT().TempDir(), scrapeConfig{
				job: job, caPEM: caPEM, token: token, target: target,
			})
			DeferCleanup(func() { Expect(prom.stop()).To(Succeed()) })
		}, NodeTimeout(5*time.Minute))

		It("scrapes the agent over verified TLS with a token: its target is up, with the node's name", func(ctx SpecContext) {
			Eventually(func(g Gomega) {
				targets, err := prom.targets(ctx)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(targets).To(HaveLen(1), "active targets of job %s", job)
				g.Expect(targets[0].Health).To(Equal("up"), "last error: %s", targets[0].LastError)
				g.Expect(targets[0].ScrapeURL).To(HavePrefix("https://"))
				g.Expect(targets[0].Labels).To(HaveKeyWithValue("node", primaryNode()))
			}).WithContext(ctx).WithTimeout(60 * time.Second).WithPolling(time.Second).Should(Succeed())
		}, SpecTimeout(90*time.Second))

		It("ingests the series of the selected pod, under the pod's own labels", func(ctx SpecContext) {
			sel := fmt.Sprintf(`{job=%q,namespace=%q,pod="mon-work",container="work"}`, job, mns)
			Eventually(func(g Gomega) {
				for _, q := range []string{"numapref_container_memory_locality_ratio" + sel, "numapref_container_memory_bytes" + sel} {
					res, err := prom.query(ctx, q)
					g.Expect(err).NotTo(HaveOccurred())
					g.Expect(res).NotTo(BeEmpty(), q)
					g.Expect(res[0].Metric).To(HaveKeyWithValue("node", primaryNode()))
				}
				res, err := prom.query(ctx, "numapref_container_memory_locality_ratio"+sel)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(res[0].Value).To(Equal("1"), "one NUMA node: all memory is local")
			}).WithContext(ctx).WithTimeout(60 * time.Second).WithPolling(time.Second).Should(Succeed())
		}, SpecTimeout(90*time.Second))

		It("evaluates every alert rule, and NUMA balancing being off on this node is pending", func(ctx SpecContext) {
			rules := alertRules()
			Expect(rules).NotTo(BeEmpty())
			for name, expr := range rules {
				_, err := prom.query(ctx, expr)
				Expect(err).NotTo(HaveOccurred(), "alert %s: %s", name, expr)
			}
			Eventually(func(g Gomega) {
				health, err := prom.ruleHealth(ctx)
				g.Expect(err).NotTo(HaveOccurred())
				for name := range rules {
					g.Expect(health).To(HaveKeyWithValue(name, "ok"), "rule %s", name)
				}
				alerts, err := prom.alerts(ctx)
				g.Expect(err).NotTo(HaveOccurred())
				// This host runs with kernel.numa_balancing=0 and has a selected container.
				g.Expect(alerts).To(ContainElement(SatisfyAll(
					HaveField("Labels", HaveKeyWithValue("alertname", "NumaprefNumaBalancingOff")),
					HaveField("Labels", HaveKeyWithValue("node", primaryNode())))))
				for _, a := range alerts {
					g.Expect(a.Labels["alertname"]).To(Equal("NumaprefNumaBalancingOff"), "no other alert on a healthy node")
				}
			}).WithContext(ctx).WithTimeout(60 * time.Second).WithPolling(time.Second).Should(Succeed())
		}, SpecTimeout(2*time.Minute))

		It("answers every dashboard query, with data for the pod's locality and the agent's memory", func(ctx SpecContext) {
			queries, err := dashboardQueries(mns)
			Expect(err).NotTo(HaveOccurred())
			withData := map[string]bool{}
			Eventually(func(g Gomega) {
				for _, q := range queries {
					res, err := prom.query(ctx, q.Expr)
					g.Expect(err).NotTo(HaveOccurred(), "panel %q: %s", q.Panel, q.Expr)
					if len(res) > 0 {
						withData[q.Panel] = true
					}
				}
				for _, p := range []string{"Memory locality", "Memory by NUMA node", "Resident memory", "Selected containers by reason", "SET results", "Kernel support by node"} {
					g.Expect(withData).To(HaveKey(p), "panel %q has no data", p)
				}
			}).WithContext(ctx).WithTimeout(60 * time.Second).WithPolling(2 * time.Second).Should(Succeed())
			logf("dashboard: %d queries parse and run; %d panels have data", len(queries), len(withData))
		}, SpecTimeout(2*time.Minute))

		It("serves metrics that promtool check metrics finds clean", func(ctx SpecContext) {
			host, _, err := net.SplitHostPort(target.address)
			Expect(err).NotTo(HaveOccurred())
			body, err := nodeShell(ctx, agentCurlAt(host, caPEM, token, "/metrics"))
			Expect(err).NotTo(HaveOccurred(), body)
			body, status, _ := strings.Cut(body, "\nHTTP ")
			Expect(strings.TrimSpace(status)).To(Equal("200"))
			cmd := exec.CommandContext(ctx, "promtool", "check", "metrics")
			cmd.Stdin = strings.NewReader(body)
			out, err := cmd.CombinedOutput()
			Expect(err).NotTo(HaveOccurred(), "promtool check metrics:\n%s", out)
			Expect(strings.TrimSpace(string(out))).To(BeEmpty())
		}, SpecTimeout(time.Minute))

		It("shows the agent's logs with kubectl logs, and runs a command in it with kubectl exec", func(ctx SpecContext) {
			out, err := kubectl(ctx, "logs", "-n", agentNamespace, "-l", "app.kubernetes.io/name=numapref,app.kubernetes.io/component=agent", "-c", "agent", "--tail=-1")
			Expect(err).NotTo(HaveOccurred(), out)
			Expect(out).To(ContainSubstring(`"msg":"Starting"`))
			Expect(out).To(ContainSubstring(primaryNode()))
			pod, err := kubectl(ctx, "get", "pod", "-n", agentNamespace, "-l", "app.kubernetes.io/name=numapref,app.kubernetes.io/component=agent", "-o", "jsonpath={.items[0].metadata.name}")
			Expect(err).NotTo(HaveOccurred(), pod)
			out, err = kubectl(ctx, "exec", "-n", agentNamespace, pod, "-c", "agent", "--", "/numapref", "probe")
			Expect(err).NotTo(HaveOccurred(), out)
			var facts map[string]any
			Expect(json.Unmarshal([]byte(out), &facts)).To(Succeed(), out)
			Expect(facts).NotTo(BeEmpty())
		}, SpecTimeout(time.Minute))

		It("draws the dashboard's main panels from a real run when E2E_SCREENSHOT names a file", func(ctx SpecContext) {
			shot := os.Getenv("E2E_SCREENSHOT")
			if shot == "" {
				return // the picture is made by hand (docs/operate/monitoring.md), not in every run
			}
			// Four minutes of history, with something happening: the workload forks every
			// poll, and a new selected pod starts every fourth.
			id := containerIDs(ctx, cl, mns, "mon-work")["work"]
			polls := 0
			Eventually(func(g Gomega) {
				polls++
				signalWorkload(ctx, id, "USR1")
				if polls%4 == 0 && polls <= 16 {
					name := fmt.Sprintf("mon-extra-%d", polls/4)
					g.Expect(cl.Create(ctx, workloadPodOn(primaryNode(), mns, name, map[string]string{"app": "e2e-mon"}, nil, "work"))).To(Succeed())
				}
				res, err := prom.query(ctx, `count_over_time(up{job="numapref-agent"}[4m])`)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(res).NotTo(BeEmpty())
				g.Expect(res[0].Value).To(Equal(fmt.Sprint(4 * 60 / 2)))
			}).WithContext(ctx).WithTimeout(6 * time.Minute).WithPolling(10 * time.Second).Should(Succeed())
			panels, err := prom.dashboardPanels(ctx, mns, 4*time.Minute, pictured...)
			Expect(err).NotTo(HaveOccurred())
			f, err := os.Create(shot)
			Expect(err).NotTo(HaveOccurred())
			defer f.Close()
			Expect(plot.Render(f, "numapref dashboard, one node (make e2e, local node, emulated kernel): namespace "+mns, panels, 2)).To(Succeed())
			Expect(f.Close()).To(Succeed())
			logf("dashboard picture: %s", shot)
		}, SpecTimeout(8*time.Minute))
	})
}

// alertRules returns the alerts of charts/numapref/files/rules.yaml by name.
func alertRules() map[string]string {
	GinkgoHelper()
	data, err := os.ReadFile("../../charts/numapref/files/rules.yaml")
	Expect(err).NotTo(HaveOccurred())
	var f struct {
		Groups []struct {
			Rules []struct {
				Alert string `json:"alert"`
				Expr  string `json:"expr"`
			} `json:"rules"`
		} `json:"groups"`
	}
	Expect(yaml.Unmarshal(data, &f)).To(Succeed())
	out := map[string]string{}
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			out[r.Alert] = r.Expr
		}
	}
	return out
}

// scrapeConfig is what Prometheus needs to scrape the agents: the chart's PodMonitor, or the
// hand-written config of its NOTES.
type scrapeConfig struct {
	job, caPEM, token string
	// target is the agent pod as the PodMonitor's pod discovery finds it: its address
	// (host network: the node's) and metrics port, and the labels its relabelings add.
	target agentTarget
}

// agentTarget is one agent pod as a scrape target.
type agentTarget struct {
	address, namespace, pod, container, node string
}

// findAgentTarget is what the PodMonitor's pod discovery and relabelings make of the agent
// on node: Debian's prometheus is built without Kubernetes service discovery, so the spec
// resolves the pod itself and hands Prometheus the same target with the same labels.
func findAgentTarget(ctx context.Context, cl client.Client, node string) (agentTarget, error) {
	var pods corev1.PodList
	if err := cl.List(ctx, &pods, client.InNamespace(agentNamespace), client.MatchingLabels{
		"app.kubernetes.io/instance": release, "app.kubernetes.io/component": "agent"}); err != nil {
		return agentTarget{}, err
	}
	for _, p := range pods.Items {
		if p.Spec.NodeName != node || p.Status.PodIP == "" || p.DeletionTimestamp != nil {
			continue
		}
		for _, c := range p.Spec.Containers {
			for _, port := range c.Ports {
				if port.Name == "metrics" {
					return agentTarget{address: net.JoinHostPort(p.Status.PodIP, fmt.Sprint(port.ContainerPort)),
						namespace: p.Namespace, pod: p.Name, container: c.Name, node: node}, nil
				}
			}
		}
	}
	return agentTarget{}, fmt.Errorf("no running agent pod with a metrics port on node %s", node)
}

// prometheus is a Prometheus server this suite started.
type prometheus struct {
	cmd    *exec.Cmd
	url    string
	logDir string
	exited chan error
}

// prometheusConfig is the scrape configuration the Prometheus Operator generates for the
// chart's PodMonitor (templates/podmonitor.yaml), in the form of the chart's NOTES: pod
// discovery of the agent pods' metrics port, HTTPS verified with the published CA for the
// address scraped (each agent serves its node's own certificate), a bearer token, the pod's labels as the operator adds them, honor_labels
// so a selected pod's own namespace/pod/container win, the node, and the rules file.
func prometheusConfig(c scrapeConfig, dir string) (string, error) {
	files := map[string]string{"ca.crt": c.caPEM, "token": c.token}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			return "", fmt.Errorf("writing %s: %w", name, err)
		}
	}
	rules, err := filepath.Abs("../../charts/numapref/files/rules.yaml")
	if err != nil {
		return "", err
	}
	return fmt.Sprintf(`global: {scrape_interval: 2s, evaluation_interval: 2s}
rule_files: [%q]
scrape_configs:
  - job_name: %s
    scheme: https
    metrics_path: /metrics
    honor_labels: true
    tls_config: {ca_file: %q}
    authorization: {credentials_file: %q}
    static_configs:
      - targets: [%q]
        labels: {namespace: %q, pod: %q, container: %q, node: %q}
`, rules, c.job, filepath.Join(dir, "ca.crt"), filepath.Join(dir, "token"),
		c.target.address, c.target.namespace, c.target.pod, c.target.container, c.target.node), nil
}

// startPrometheus starts Debian's prometheus on a free loopback port with c, and waits until
// it is ready.
func startPrometheus(ctx context.Context, dir string, c scrapeConfig) *prometheus {
	GinkgoHelper()
	cfg, err := prometheusConfig(c, dir)
	Expect(err).NotTo(HaveOccurred())
	Expect(os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o600)).To(Succeed())
	out, err := exec.CommandContext(ctx, "promtool", "check", "config", filepath.Join(dir, "prometheus.yml")).CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "promtool check config:\n%s", out)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	Expect(err).NotTo(HaveOccurred())
	addr := l.Addr().String()
	Expect(l.Close()).To(Succeed())
	logFile, err := os.Create(filepath.Join(dir, "prometheus.log"))
	Expect(err).NotTo(HaveOccurred())
	p := &prometheus{url: "http://" + addr, logDir: dir, exited: make(chan error, 1)}
	p.cmd = exec.Command("prometheus", "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+addr)
	p.cmd.Stdout, p.cmd.Stderr = logFile, logFile
	Expect(p.cmd.Start()).To(Succeed())
	go func() { p.exited <- p.cmd.Wait(); logFile.Close() }()
	logf("prometheus pid %d at %s", p.cmd.Process.Pid, p.url)
	Eventually(func() error {
		select {
		case err := <-p.exited:
			p.exited <- err
			return StopTrying("prometheus exited").Wrap(fmt.Errorf("%v: %s", err, p.log()))
		default:
		}
		return p.get(ctx, "/-/ready", nil)
	}).WithContext(ctx).WithTimeout(30 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
	return p
}

func (p *prometheus) log() string {
	data, _ := os.ReadFile(filepath.Join(p.logDir, "prometheus.log"))
	return string(data)
}

// stop ends the server by its pid (SIGTERM, then SIGKILL after 20 s) and waits for it.
func (p *prometheus) stop() error {
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("stopping prometheus (pid %d): %w", p.cmd.Process.Pid, err)
	}
	select {
	case err := <-p.exited:
		_ = err // how it exited after SIGTERM, which asked it to
		return nil
	case <-time.After(20 * time.Second):
		p.cmd.Process.Kill()
		err := <-p.exited
		_ = err // "signal: killed": the error below says why
		return fmt.Errorf("prometheus (pid %d) ignored SIGTERM for 20 s", p.cmd.Process.Pid)
	}
}

// get GETs path from the server's API and decodes the data of its answer into into.
func (p *prometheus) get(ctx context.Context, path string, into any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.url+path, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("GET %s: %w", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("GET %s: %w", path, err)
	}
	if into == nil {
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: %s: %s", path, resp.Status, body)
		}
		return nil
	}
	var ans struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &ans); err != nil {
		return fmt.Errorf("GET %s: %s: %w", path, body, err)
	}
	if ans.Status != "success" {
		return fmt.Errorf("GET %s: %s: %s", path, ans.Status, ans.Error)
	}
	return json.Unmarshal(ans.Data, into)
}

type sample struct {
	Metric map[string]string
	Value  string
}

// query runs an instant query; an error is Prometheus' (e.g. a parse error).
func (p *prometheus) query(ctx context.Context, expr string) ([]sample, error) {
	var data struct {
		Result []struct {
			Metric map[string]string `json:"metric"`
			Value  [2]any            `json:"value"`
		} `json:"result"`
	}
	if err := p.get(ctx, "/api/v1/query?query="+url.QueryEscape(expr), &data); err != nil {
		return nil, err
	}
	var out []sample
	for _, r := range data.Result {
		out = append(out, sample{Metric: r.Metric, Value: fmt.Sprint(r.Value[1])})
	}
	return out, nil
}

type target struct {
	Labels    map[string]string `json:"labels"`
	ScrapeURL string            `json:"scrapeUrl"`
	Health    string            `json:"health"`
	LastError string            `json:"lastError"`
}

func (p *prometheus) targets(ctx context.Context) ([]target, error) {
	var data struct {
		Active []target `json:"activeTargets"`
	}
	err := p.get(ctx, "/api/v1/targets?state=active", &data)
	return data.Active, err
}

// ruleHealth returns each rule's health (ok, err, unknown) by name, once evaluated.
func (p *prometheus) ruleHealth(ctx context.Context) (map[string]string, error) {
	var data struct {
		Groups []struct {
			Rules []struct {
				Name      string `json:"name"`
				Health    string `json:"health"`
				LastError string `json:"lastError"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := p.get(ctx, "/api/v1/rules", &data); err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, g := range data.Groups {
		for _, r := range g.Rules {
			out[r.Name] = r.Health + r.LastError
		}
	}
	return out, nil
}

type alert struct {
	Labels map[string]string `json:"labels"`
	State  string            `json:"state"`
}

// alerts returns the pending and firing alerts.
func (p *prometheus) alerts(ctx context.Context) ([]alert, error) {
	var data struct {
		Alerts []alert `json:"alerts"`
	}
	err := p.get(ctx, "/api/v1/alerts", &data)
	return data.Alerts, err
}

// pictured are the dashboard panels of docs/operate/monitoring.md's picture.
var pictured = []string{
	"Selected containers by reason", "Tasks by state", "SET results", "Fork to applied",
	"Memory by NUMA node", "Memory locality", "CPU", "Resident memory",
}

// dashboardPanels runs the queries of the dashboard panels named titles over the last
// span, with the dashboard's variables set to every node and pod of namespace, and returns
// them as plot panels, named and labelled as the dashboard's legends and units say.
func (p *prometheus) dashboardPanels(ctx context.Context, namespace string, span time.Duration, titles ...string) ([]plot.Panel, error) {
	queries, err := dashboardQueries(namespace)
	if err != nil {
		return nil, err
	}
	end := time.Now()
	var out []plot.Panel
	for _, title := range titles {
		panel := plot.Panel{Title: title}
		for _, q := range queries {
			if q.Panel != title {
				continue
			}
			panel.Unit = plotUnit(q.Unit)
			series, err := p.queryRange(ctx, q.Expr, end.Add(-span), end, 5*time.Second)
			if err != nil {
				return nil, fmt.Errorf("panel %q: %w", title, err)
			}
			for _, s := range series {
				panel.Series = append(panel.Series, plot.Series{Name: q.Name(s.labels), Points: s.points})
			}
		}
		if panel.Series == nil {
			return nil, fmt.Errorf("panel %q: no data (or no such panel)", title)
		}
		out = append(out, panel)
	}
	return out, nil
}

// dashboardQueries are the chart dashboard's queries with its variables set to every node
// and pod of namespace, and Grafana's rate interval at this suite's 2 s scrape.
func dashboardQueries(namespace string) ([]dashboard.Query, error) {
	data, err := os.ReadFile("../../charts/numapref/files/dashboard.json")
	if err != nil {
		return nil, err
	}
	vars := maps.Clone(dashboard.SampleVars)
	vars["namespace"], vars["__rate_interval"] = namespace, "30s"
	return dashboard.Queries(data, vars)
}

// plotUnit is the plot unit of a Grafana unit.
func plotUnit(grafana string) plot.Unit {
	switch grafana {
	case "bytes":
		return plot.Bytes
	case "s":
		return plot.Seconds
	case "ops", "reqps":
		return plot.PerSecond
	case "percentunit":
		return plot.Ratio
	}
	return plot.Plain
}

type rangeSeries struct {
	labels map[string]string
	points []plot.Point
}

// queryRange runs a range query from start to end at step.
func (p *prometheus) queryRange(ctx context.Context, expr string, start, end time.Time, step time.Duration) ([]rangeSeries, error) {
	var data struct {
		Result []struct {
			Metric map[string]string `json:"metric"`
			Values [][2]any          `json:"values"`
		} `json:"result"`
	}
	q := url.Values{}
	q.Set("query", expr)
	q.Set("start", strconv.FormatInt(start.Unix(), 10))
	q.Set("end", strconv.FormatInt(end.Unix(), 10))
	q.Set("step", strconv.Itoa(int(step.Seconds())))
	if err := p.get(ctx, "/api/v1/query_range?"+q.Encode(), &data); err != nil {
		return nil, err
	}
	var out []rangeSeries
	for _, r := range data.Result {
		s := rangeSeries{labels: r.Metric}
		for _, v := range r.Values {
			at, ok := v[0].(float64)
			text, ok2 := v[1].(string)
			if !ok || !ok2 {
				return nil, fmt.Errorf("range query %s: a sample %v is not [time, \"value\"]", expr, v)
			}
			val, err := strconv.ParseFloat(text, 64)
			if err != nil {
				return nil, fmt.Errorf("range query %s: %w", expr, err)
			}
			s.points = append(s.points, plot.Point{T: time.Unix(0, int64(at*1e9)), V: val})
		}
		out = append(out, s)
	}
	return out, nil
}
