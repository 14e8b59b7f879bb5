// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/internal/nodeagent/plan"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Node labels the agent publishes, so users can target capable nodes.
const (
	LabelKernelSupport = "numapref.io/kernel-support" // prctl, emulator or unsupported
	LabelNUMABalancing = "numapref.io/numa-balancing" // disabled, normal, memory-tiering, normal-memory-tiering
	LabelNUMANodes     = "numapref.io/numa-nodes"     // online NUMA node count
	LabelNRI           = "numapref.io/nri"            // connected or disconnected; absent without --nri-socket
	LabelMemoryPolicy  = "numapref.io/memory-policy"  // available or unavailable: mechanism memoryPolicy
	LabelPageMigration = "numapref.io/page-migration" // available or unavailable: mechanism migrate
)

// NodeFacts are this host's kernel facts, as node labels and in the node's report.
type NodeFacts struct {
	KernelSupport string
	NUMABalancing string
	NUMANodes     int
	// NRI is numav1.NRIConnected or NRIDisconnected for an agent with an NRI plugin, ""
	// without one.
	NRI string
	// MemoryPolicies says the kernel takes a soft memory policy (MPOL_PREFERRED).
	MemoryPolicies bool
	// PageMigration says the agent moves containers' pages to their home (its
	// -page-migration-rate is above 0 and the kernel has page migration).
	PageMigration bool
}

// Mechanisms are what can give a container its home on this node, as the report names
// them: prctl where the kernel backend sets a preferred node, memoryPolicy where the
// runtime is reachable through NRI and the kernel takes a soft memory policy.
func (f NodeFacts) Mechanisms() []string {
	var m []string
	if f.KernelSupport == "prctl" || f.KernelSupport == "emulator" {
		m = append(m, plan.MechanismPrctl)
	}
	if f.MemoryPolicy() {
		m = append(m, plan.MechanismMemoryPolicy)
	}
	if f.PageMigration {
		m = append(m, plan.MechanismMigrate)
	}
	return m
}

// MemoryPolicy says whether mechanism memoryPolicy is offered.
func (f NodeFacts) MemoryPolicy() bool { return f.MemoryPolicies && f.NRI == numav1.NRIConnected }

// BalancingEnabled is false when kernel.numa_balancing is known to be disabled: the kernel
// then ignores every preferred node.
func (f NodeFacts) BalancingEnabled() bool { return f.NUMABalancing != "disabled" }

// publishLabels applies the node's labels when the facts changed since the last time.
func (r *NodeAgentReconciler) publishLabels(ctx context.Context, facts NodeFacts) error {
	if facts == r.labels {
		return nil
	}
	labels := map[string]string{
		LabelKernelSupport: facts.KernelSupport,
		LabelNUMABalancing: facts.NUMABalancing,
		LabelNUMANodes:     strconv.Itoa(facts.NUMANodes),
		LabelMemoryPolicy:  availability(facts.MemoryPolicy()),
		LabelPageMigration: availability(facts.PageMigration),
	}
	if facts.NRI != "" {
		// Left out without NRI: server-side apply then removes a label this manager set.
		labels[LabelNRI] = strings.ToLower(facts.NRI)
	}
	ac := corev1ac.Node(r.nodeName).WithLabels(labels)
	if err := r.client.Apply(ctx, ac, client.FieldOwner(AgentFieldManager(r.nodeName)), client.ForceOwnership); err != nil {
		return fmt.Errorf("labelling node %s: %w", r.nodeName, err)
	}
	r.labels = facts
	return nil
}

// availability is a mechanism's label value.
func availability(offered bool) string {
	if offered {
		return "available"
	}
	return "unavailable"
}
