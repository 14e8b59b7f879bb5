// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build integration

package main

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/numapref/numapref/internal/testutil/builders"
)

// TestDiscoverAgent runs discovery against a real API server holding pods of several
// nodes and the agent pods of some of them.
func TestDiscoverAgent(t *testing.T) {
	_, cs := apiServer(t)
	ctx := context.Background()
	app := func(name, node string) {
		createPod(t, cs, builders.MakePod("disc", name).Node(node).Containers("main").Obj())
	}
	agent := func(name, node string, port int32, status corev1.PodStatus, mutate ...func(*corev1.Pod)) {
		p := agentPod(name, node, port, status)
		for _, m := range mutate {
			m(p)
		}
		createPod(t, cs, p)
	}

	app("db", "disc-1")
	agent("a1", "disc-1", 9443, runningAgent("10.1.0.1"))

	app("on-pod-network", "disc-2")
	agent("a2", "disc-2", 9443, corev1.PodStatus{Phase: corev1.PodRunning, HostIP: "10.1.0.2", PodIP: "10.244.0.7"},
		func(p *corev1.Pod) { p.Spec.HostNetwork = false })

	app("no-metrics-port", "disc-3")
	agent("a3", "disc-3", 9443, runningAgent("10.1.0.3"), func(p *corev1.Pod) { p.Spec.Containers[0].Ports = nil })

	app("rolling", "disc-4")
	agent("a4-old", "disc-4", 9443, runningAgent("10.1.0.4"))
	notReady := runningAgent("10.1.0.44")
	notReady.Conditions[0].Status = corev1.ConditionFalse
	agent("a4-new", "disc-4", 9443, notReady)

	app("pending-agent", "disc-5")
	agent("a5", "disc-5", 9443, corev1.PodStatus{Phase: corev1.PodPending})

	app("no-agent", "disc-6")
	agent("a6-elsewhere", "disc-6-other", 9443, runningAgent("10.1.0.6"))

	app("node-ip", "disc-7")
	agent("a7", "disc-7", 9443, corev1.PodStatus{Phase: corev1.PodRunning})
	node, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "disc-7"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: "disc-7"}, {Type: corev1.NodeInternalIP, Address: "10.1.0.7"}}
	if _, err := cs.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	createPod(t, cs, builders.MakePod("disc", "unscheduled").Containers("main").Obj())

	def := discovery{namespace: defaultAgentNamespace, selector: defaultAgentSelector}
	tests := map[string]struct {
		pod   string
		d     discovery
		want  agentTarget
		error string
	}{
		"host network agent": {pod: "db", d: def,
			want: agentTarget{node: "disc-1", agent: "numapref-system/a1", url: "https://10.1.0.1:9443"}},
		"port flag wins": {pod: "db", d: discovery{namespace: defaultAgentNamespace, selector: defaultAgentSelector, port: 7000},
			want: agentTarget{node: "disc-1", agent: "numapref-system/a1", url: "https://10.1.0.1:7000"}},
		"release-specific selector": {pod: "db", d: discovery{namespace: defaultAgentNamespace, selector: "app.kubernetes.io/instance=np,app.kubernetes.io/component=agent"},
			want: agentTarget{node: "disc-1", agent: "numapref-system/a1", url: "https://10.1.0.1:9443"}},
		"pod network agent": {pod: "on-pod-network", d: def,
			want: agentTarget{node: "disc-2", agent: "numapref-system/a2", url: "https://10.244.0.7:9443"}},
		"no metrics port: default": {pod: "no-metrics-port", d: def,
			want: agentTarget{node: "disc-3", agent: "numapref-system/a3", url: "https://10.1.0.3:8443"}},
		"ready agent first": {pod: "rolling", d: def,
			want: agentTarget{node: "disc-4", agent: "numapref-system/a4-old", url: "https://10.1.0.4:9443"}},
		"node InternalIP when the agent reports none": {pod: "node-ip", d: def,
			want: agentTarget{node: "disc-7", agent: "numapref-system/a7", url: "https://10.1.0.7:9443"}},
		"pending agent":              {pod: "pending-agent", d: def, error: "agent pod a5 is not running (phase Pending)"},
		"agent on another node only": {pod: "no-agent", d: def, error: "numapref agent on node disc-6"},
		"other release":              {pod: "db", d: discovery{namespace: defaultAgentNamespace, selector: "app.kubernetes.io/instance=other"}, error: "no agent pod found"},
		"other namespace":            {pod: "db", d: discovery{namespace: "kube-system", selector: defaultAgentSelector}, error: "no agent pod found"},
		"invalid selector":           {pod: "db", d: discovery{namespace: defaultAgentNamespace, selector: "a in (b"}, error: "--agent-selector"},
		"unscheduled pod":            {pod: "unscheduled", d: def, error: "not scheduled to a node yet"},
		"pod does not exist":         {pod: "ghost", d: def, error: `pods "ghost" not found`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := discoverAgent(ctx, cs, "disc", tc.pod, tc.d)
			if tc.error != "" {
				if err == nil || !strings.Contains(err.Error(), tc.error) {
					t.Fatalf("discoverAgent = %+v, %v; want an error containing %q", got, err, tc.error)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("discoverAgent = %+v, want %+v", got, tc.want)
			}
		})
	}
}
