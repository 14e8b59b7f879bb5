// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build chart

package chart

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// The Prometheus Operator's APIs, as `helm install` sees them on a cluster that has them.
var operatorAPIs = []string{"--api-versions", "monitoring.coreos.com/v1/PodMonitor", "--api-versions", "monitoring.coreos.com/v1/PrometheusRule"}

func monitoringValues(podMonitor, rule, dashboard map[string]any) map[string]any {
	m := map[string]any{"enabled": true, "port": 8443}
	for k, v := range map[string]map[string]any{"podMonitor": podMonitor, "prometheusRule": rule, "dashboard": dashboard} {
		if v != nil {
			m[k] = v
		}
	}
	return map[string]any{"metrics": m}
}

func TestMonitoringOffByDefault(t *testing.T) {
	r := render(t, nil, operatorAPIs...)
	for key := range r.other {
		if strings.HasPrefix(key, "PodMonitor/") || strings.HasPrefix(key, "PrometheusRule/") {
			t.Errorf("%s rendered by default", key)
		}
	}
	for name, cm := range r.configMaps {
		if _, ok := cm.Labels["grafana_dashboard"]; ok {
			t.Errorf("dashboard ConfigMap %s rendered by default", name)
		}
	}
	if _, ok := r.secrets[release+"-numapref-metrics-scraper"]; ok {
		t.Error("the scraper's token Secret rendered by default")
	}
}

func TestMonitoringNeedsTheOperatorsAPI(t *testing.T) {
	tests := map[string]struct {
		values map[string]any
		want   string
	}{
		"PodMonitor":     {monitoringValues(map[string]any{"enabled": true}, nil, nil), "needs the Prometheus Operator's PodMonitor API"},
		"PrometheusRule": {monitoringValues(nil, map[string]any{"enabled": true}, nil), "needs the Prometheus Operator's PrometheusRule API"},
		"PodMonitor without metrics": {map[string]any{"metrics": map[string]any{"enabled": false, "port": 8443, "podMonitor": map[string]any{"enabled": true}}},
			"metrics.podMonitor.enabled needs metrics.enabled"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, stderr, err := helmTemplate(t, tc.values)
			if err == nil || !strings.Contains(stderr, tc.want) {
				t.Errorf("helm template: %v, want a failure saying %q:\n%s", err, tc.want, stderr)
			}
		})
	}
}

// podMonitorEndpoint is the part of a PodMonitor the chart sets.
type podMonitorEndpoint struct {
	Port        string `json:"port"`
	Scheme      string `json:"scheme"`
	Path        string `json:"path"`
	Interval    string `json:"interval"`
	HonorLabels bool   `json:"honorLabels"`
	TLSConfig   struct {
		CA struct {
			ConfigMap corev1.ConfigMapKeySelector `json:"configMap"`
		} `json:"ca"`
		ServerName string `json:"serverName"`
	} `json:"tlsConfig"`
	Authorization struct {
		Type        string                   `json:"type"`
		Credentials corev1.SecretKeySelector `json:"credentials"`
	} `json:"authorization"`
	Relabelings []map[string]any `json:"relabelings"`
}

func podMonitorOf(t *testing.T, r rendered) (selector map[string]string, ep podMonitorEndpoint) {
	t.Helper()
	obj, ok := r.other["PodMonitor/"+release+"-numapref-agent"]
	if !ok {
		t.Fatalf("no PodMonitor; rendered %v", keys(r.other))
	}
	data, _ := json.Marshal(obj["spec"])
	var spec struct {
		Selector struct {
			MatchLabels map[string]string `json:"matchLabels"`
		} `json:"selector"`
		NamespaceSelector struct {
			MatchNames []string `json:"matchNames"`
		} `json:"namespaceSelector"`
		Endpoints []podMonitorEndpoint `json:"podMetricsEndpoints"`
	}
	if err := json.Unmarshal(data, &spec); err != nil {
		t.Fatal(err)
	}
	if len(spec.Endpoints) != 1 || !cmp.Equal(spec.NamespaceSelector.MatchNames, []string{namespace}) {
		t.Fatalf("PodMonitor spec: %s", data)
	}
	return spec.Selector.MatchLabels, spec.Endpoints[0]
}

// The PodMonitor scrapes the agent pods' metrics port over TLS verified with the chart's
// published CA and name, with the token of an identity that may GET /metrics and nothing else.
func TestPodMonitor(t *testing.T) {
	r := render(t, monitoringValues(map[string]any{"enabled": true, "labels": map[string]any{"release": "kps"}}, nil, nil), operatorAPIs...)
	selector, ep := podMonitorOf(t, r)
	pods := r.daemonSets[0].Spec.Template.Labels
	for k, v := range selector {
		if pods[k] != v {
			t.Errorf("selector %s=%s does not match the agent pods' labels %v", k, v, pods)
		}
	}
	if ep.Port != "metrics" || ep.Scheme != "https" || ep.Path != "/metrics" || !ep.HonorLabels {
		t.Errorf("endpoint %+v: want port metrics, https, /metrics, honorLabels", ep)
	}
	// The signer publishes the ConfigMap with per-node certificates (the default).
	if ep.TLSConfig.CA.ConfigMap.Name != "numapref-agent-ca" || ep.TLSConfig.CA.ConfigMap.Key != "ca.crt" {
		t.Errorf("TLS CA %+v: want the ConfigMap numapref-agent-ca, key ca.crt", ep.TLSConfig.CA)
	}
	// Per-node certificates (the default): Prometheus verifies each target's address,
	// which its node's certificate names; no shared name. With one certificate for all,
	// the published name.
	if ep.TLSConfig.ServerName != "" {
		t.Errorf("serverName %q, want none: each agent's address is verified", ep.TLSConfig.ServerName)
	}
	sharedValues := monitoringValues(map[string]any{"enabled": true}, nil, nil)
	sharedValues["tls"] = map[string]any{"nodeCertificates": false}
	shared := render(t, sharedValues, operatorAPIs...)
	_, sharedEP := podMonitorOf(t, shared)
	if want := release + "-numapref-agent." + namespace + ".svc"; sharedEP.TLSConfig.ServerName != want || shared.configMaps["numapref-agent-ca"].Data["serverName"] != want {
		t.Errorf("one certificate for all: serverName %q (ConfigMap: %q), want %q", sharedEP.TLSConfig.ServerName, shared.configMaps["numapref-agent-ca"].Data["serverName"], want)
	}
	scraper := release + "-numapref-metrics-scraper"
	if ep.Authorization.Type != "Bearer" || ep.Authorization.Credentials.Name != scraper || ep.Authorization.Credentials.Key != "token" {
		t.Errorf("authorization %+v: want the Bearer token of Secret %s", ep.Authorization, scraper)
	}
	// No token Secret that never expires: the signer keeps an expiring one there.
	if sec, ok := r.secrets[scraper]; ok {
		t.Errorf("the release renders Secret %s (type %q): the signer keeps an expiring token there", scraper, sec.Type)
	}
	signer := r.deployments[release+"-numapref-signer"].Spec.Template.Spec.Containers[0].Args
	for _, a := range []string{"--scraper-token-secret=" + scraper, "--scraper-service-account=" + scraper, "--scraper-token-lifetime=1h"} {
		if !slices.Contains(signer, a) {
			t.Errorf("signer args %v lack %s", signer, a)
		}
	}
	if role := r.roles[release+"-numapref-signer"]; !grantsVerb(role.Rules, "serviceaccounts/token", "create") {
		t.Errorf("the signer may not ask for the scraper's token: %+v", role.Rules)
	}
	checkBinding(t, r.clusterRoleBindings, scraper,
		rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: release + "-numapref-metrics-reader"},
		[]rbacv1.Subject{{Kind: "ServiceAccount", Name: scraper, Namespace: namespace}})
	want := []map[string]any{
		{"sourceLabels": []any{"__meta_kubernetes_pod_node_name"}, "targetLabel": "node"},
		{"targetLabel": "job", "replacement": "numapref-agent"},
	}
	if diff := cmp.Diff(want, ep.Relabelings); diff != "" {
		t.Errorf("relabelings: the rules need node and job (-want +got)\n%s", diff)
	}
	if got := r.other["PodMonitor/"+release+"-numapref-agent"]["metadata"].(map[string]any)["labels"].(map[string]any)["release"]; got != "kps" {
		t.Errorf("PodMonitor label release=%v, want kps from podMonitor.labels", got)
	}
}

// The signer's token is bound to the agents' audience, so requireAgentAudience works with
// it; a Secret named instead is used as it is, and the signer keeps none.
func TestPodMonitorAgentAudience(t *testing.T) {
	values := monitoringValues(map[string]any{"enabled": true}, nil, nil)
	values["metrics"].(map[string]any)["requireAgentAudience"] = true
	render(t, values, operatorAPIs...)
	values["metrics"].(map[string]any)["podMonitor"] = map[string]any{"enabled": true, "tokenSecret": map[string]any{"name": "agent-token", "key": "t"}}
	r := render(t, values, operatorAPIs...)
	if _, ep := podMonitorOf(t, r); ep.Authorization.Credentials.Name != "agent-token" || ep.Authorization.Credentials.Key != "t" {
		t.Errorf("credentials %+v, want agent-token/t", ep.Authorization.Credentials)
	}
	if slices.Contains(names(r.serviceAccounts), release+"-numapref-metrics-scraper") {
		t.Error("the scraper's identity rendered although a Secret is named")
	}
	for _, a := range r.deployments[release+"-numapref-signer"].Spec.Template.Spec.Containers[0].Args {
		if strings.HasPrefix(a, "--scraper-") {
			t.Errorf("the signer keeps a scraper token although a Secret is named: %s", a)
		}
	}
}

// The PrometheusRule holds files/rules.yaml's groups unchanged: what promtool tests is
// what Prometheus loads.
func TestPrometheusRule(t *testing.T) {
	r := render(t, monitoringValues(nil, map[string]any{"enabled": true}, nil), operatorAPIs...)
	obj, ok := r.other["PrometheusRule/"+release+"-numapref"]
	if !ok {
		t.Fatalf("no PrometheusRule; rendered %v", keys(r.other))
	}
	data, err := os.ReadFile(filepath.Join(repoRoot(t), chartDir, "files/rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var file map[string]any
	if err := yaml.Unmarshal(data, &file); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(file, obj["spec"]); diff != "" {
		t.Errorf("spec differs from files/rules.yaml (-file +spec)\n%s", diff)
	}
}

func TestDashboardConfigMap(t *testing.T) {
	r := render(t, monitoringValues(nil, nil, map[string]any{"enabled": true}))
	cm, ok := r.configMaps[release+"-numapref-dashboard"]
	if !ok || cm.Labels["grafana_dashboard"] != "1" {
		t.Fatalf("dashboard ConfigMap %v (labels %v), want one labelled grafana_dashboard: \"1\"", ok, cm.Labels)
	}
	data, err := os.ReadFile(filepath.Join(repoRoot(t), chartDir, "files/dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var want, got map[string]any
	if err := json.Unmarshal(data, &want); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(cm.Data["numapref.json"]), &got); err != nil {
		t.Fatalf("numapref.json is not JSON: %v", err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("numapref.json differs from files/dashboard.json (-file +ConfigMap)\n%s", diff)
	}
}

func TestMonitoringSchemaRejects(t *testing.T) {
	tests := map[string]struct {
		values map[string]any
		field  string
	}{
		"podMonitor.enabled as string": {monitoringValues(map[string]any{"enabled": "yes"}, nil, nil), "enabled"},
		"misspelled podMonitor key":    {monitoringValues(map[string]any{"enabled": true, "intervall": "30s"}, nil, nil), "intervall"},
		"interval without unit":        {monitoringValues(map[string]any{"enabled": true, "interval": "30"}, nil, nil), "interval"},
		"token Secret without key":     {monitoringValues(map[string]any{"enabled": true, "tokenSecret": map[string]any{"name": "s", "key": ""}}, nil, nil), "key"},
		"rule labels not strings":      {monitoringValues(nil, map[string]any{"enabled": true, "labels": map[string]any{"a": 1}}, nil), "a"},
		"dashboard namespace invalid":  {monitoringValues(nil, nil, map[string]any{"enabled": true, "namespace": "Grafana"}), "namespace"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			out, stderr, err := helmTemplate(t, tc.values, operatorAPIs...)
			if err == nil {
				t.Fatalf("helm template accepted %v; rendered %d bytes", tc.values, len(out))
			}
			if !strings.Contains(stderr, "schema") || !strings.Contains(stderr, tc.field) {
				t.Errorf("helm template failed, but not on the schema for %s:\n%s", tc.field, stderr)
			}
		})
	}
}
