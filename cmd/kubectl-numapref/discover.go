// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
)

// discovery says where the agent pods are.
type discovery struct {
	namespace string
	selector  string
	// port overrides the agent pod's metrics port when not 0.
	port int
}

// agentTarget is the agent that answers for a pod.
type agentTarget struct {
	node  string
	agent string // namespace/name of the agent pod
	url   string // https://host:port
}

// discoverAgent finds the node of pod namespace/name, the running agent pod on that node,
// and the address of its metrics server: the agent pod's host IP when it uses the host
// network (as deployed), else its pod IP; the node's InternalIP if the pod reports none.
// It needs get on the pod, list on pods in the agent namespace and, only for that
// fallback, get on the node.
func discoverAgent(ctx context.Context, cs kubernetes.Interface, namespace, name string, d discovery) (agentTarget, error) {
	sel, err := labels.Parse(d.selector)
	if err != nil {
		return agentTarget{}, usageError("--agent-selector %q: %v", d.selector, err)
	}
	pod, err := cs.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return agentTarget{}, fmt.Errorf("getting pod %s/%s: %w", namespace, name, err)
	}
	node := pod.Spec.NodeName
	if node == "" {
		return agentTarget{}, fmt.Errorf("pod %s/%s is not scheduled to a node yet", namespace, name)
	}
	list, err := cs.CoreV1().Pods(d.namespace).List(ctx, metav1.ListOptions{
		LabelSelector: sel.String(),
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node).String(),
	})
	if err != nil {
		return agentTarget{}, fmt.Errorf("listing agent pods (%s) in namespace %s: %w", sel, d.namespace, err)
	}
	agent, err := pickAgent(list.Items)
	if err != nil {
		return agentTarget{}, fmt.Errorf("numapref agent on node %s (pods %s in namespace %s; see --agent-namespace, --agent-selector): %w", node, sel, d.namespace, err)
	}
	host := agent.Status.PodIP
	if agent.Spec.HostNetwork {
		host = agent.Status.HostIP
	}
	if host == "" {
		if host, err = nodeInternalIP(ctx, cs, node); err != nil {
			return agentTarget{}, fmt.Errorf("agent pod %s/%s reports no IP: %w", agent.Namespace, agent.Name, err)
		}
	}
	port := d.port
	if port == 0 {
		port = metricsPort(agent)
	}
	return agentTarget{
		node:  node,
		agent: agent.Namespace + "/" + agent.Name,
		url:   "https://" + net.JoinHostPort(host, strconv.Itoa(port)),
	}, nil
}

// pickAgent chooses among the agent pods of one node: running and not being deleted,
// ready first, then the newest (during a rolling update two may run).
func pickAgent(pods []corev1.Pod) (*corev1.Pod, error) {
	var live []*corev1.Pod
	for i := range pods {
		p := &pods[i]
		if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
			live = append(live, p)
		}
	}
	if len(live) == 0 {
		if len(pods) == 0 {
			return nil, fmt.Errorf("no agent pod found")
		}
		return nil, fmt.Errorf("agent pod %s is not running (phase %s)", pods[0].Name, pods[0].Status.Phase)
	}
	slices.SortFunc(live, func(a, b *corev1.Pod) int {
		if ra, rb := ready(a), ready(b); ra != rb {
			if ra {
				return -1
			}
			return 1
		}
		return cmp.Or(b.CreationTimestamp.Compare(a.CreationTimestamp.Time), cmp.Compare(a.Name, b.Name))
	})
	return live[0], nil
}

func ready(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// metricsPort is the agent container's port named "metrics", else the default.
func metricsPort(p *corev1.Pod) int {
	for _, c := range p.Spec.Containers {
		for _, port := range c.Ports {
			if port.Name == metricsPortName && port.ContainerPort > 0 {
				return int(port.ContainerPort)
			}
		}
	}
	return defaultAgentPort
}

func nodeInternalIP(ctx context.Context, cs kubernetes.Interface, name string) (string, error) {
	node, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsForbidden(err) {
		return "", fmt.Errorf("reading node %s for its InternalIP: %w (or give --agent-url)", name, err)
	}
	if err != nil {
		return "", fmt.Errorf("reading node %s for its InternalIP: %w", name, err)
	}
	for _, a := range node.Status.Addresses {
		if a.Type == corev1.NodeInternalIP && a.Address != "" {
			return a.Address, nil
		}
	}
	return "", fmt.Errorf("node %s has no InternalIP address", name)
}
