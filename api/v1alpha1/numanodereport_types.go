// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NumaNodeReport is what the agent on one Kubernetes node did, for every NumaPreference
// that selects pods there, and the node's kernel facts. It is named after the node, owned
// by the Node (deleted with it) and written only by that node's agent: a
// ValidatingAdmissionPolicy refuses any other agent. One node's change costs one write of
// its own small object, whatever the size of the cluster; the elected summarizer adds the
// reports up into each NumaPreference's status.
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=numareport,categories=numa
// +kubebuilder:printcolumn:name="Kernel",type=string,JSONPath=`.status.kernelSupport`
// +kubebuilder:printcolumn:name="Balancing",type=string,JSONPath=`.status.numaBalancing`
// +kubebuilder:printcolumn:name="NRI",type=string,JSONPath=`.status.nri`,priority=1
// +kubebuilder:printcolumn:name="NUMA-Nodes",type=integer,JSONPath=`.status.numaNodes`
// +kubebuilder:printcolumn:name="Preferences",type=integer,JSONPath=`.status.totals.preferences`
// +kubebuilder:printcolumn:name="Pods",type=integer,JSONPath=`.status.totals.pods`
// +kubebuilder:printcolumn:name="Tasks",type=integer,JSONPath=`.status.totals.tasks`
// +kubebuilder:printcolumn:name="Problems",type=integer,JSONPath=`.status.totals.problems`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type NumaNodeReport struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	Status NumaNodeReportStatus `json:"status,omitempty"`
}

// ConditionNodeRestricted says whether the node restriction policy (a
// ValidatingAdmissionPolicy) holds the agents to their own node. On a NumaNodeReport it is
// the agent's last check: True (NodeRestrictionEnforced) when the API refused its dry-run
// writes of another node's report and of a foreign label on its own Node, False
// (NodeRestrictionMissing) when it accepted either. On a NumaPreference it is present, and
// False, only while some node that reports the preference says False: any agent could then
// have written what the status adds up.
const ConditionNodeRestricted = "NodeRestricted"

// ConditionNRIConnected, on a NumaNodeReport of an agent configured for NRI, says whether
// it is registered with the container runtime: True (reason NRIConnected) or False (reason
// NRINotConnected: new containers are placed only after they start).
const ConditionNRIConnected = "NRIConnected"

// ConditionDrained, on a NumaNodeReport, is the agent's word on its drain, written once
// its DaemonSet was deleted (helm uninstall): True (reason Drained) when every value it
// set is put back, False (reason UndoIncomplete) while some could not be. Its message
// names the DaemonSet's UID, so that a check of one uninstall reads no earlier one's. A
// new agent of the node takes it away.
const ConditionDrained = "Drained"

// Values of NumaNodeReportStatus.NRI.
const (
	NRIConnected    = "Connected"
	NRIDisconnected = "Disconnected"
)

// NumaNodeReportStatus is one node's report.
type NumaNodeReportStatus struct {
	// kernelSupport says whether the node's kernel can set a preferred node: prctl,
	// emulator or unsupported.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	KernelSupport string `json:"kernelSupport,omitempty"`
	// numaBalancing is kernel.numa_balancing: disabled, normal, memory-tiering or
	// normal-memory-tiering. The kernel acts on a preference only while it is enabled.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	NumaBalancing string `json:"numaBalancing,omitempty"`
	// numaNodes counts the node's online NUMA nodes.
	// +optional
	NumaNodes int32 `json:"numaNodes,omitempty"`

	// ledgerDamaged counts the ledgers this node's agent found damaged at its start
	// (unreadable, past its bound, unparsable or failing its checksum; reason
	// LedgerDamaged): 1 means the values the agent had recorded before are lost, and may
	// never be undone. 0 again after an agent starts with an intact ledger.
	// +optional
	// +kubebuilder:validation:Minimum=0
	LedgerDamaged int32 `json:"ledgerDamaged,omitempty"`

	// mechanisms are what can give a container its home on this node: prctl (the kernel's
	// preferred-node prctl, or the emulator), memoryPolicy (a memory policy given at a
	// container's creation: the agent is connected to the runtime through NRI and the
	// kernel takes a soft memory policy) and migrate (the agent moves a container's pages
	// to its home: --page-migration-rate is not 0 and the kernel has page migration).
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=4
	// +kubebuilder:validation:items:Enum=prctl;memoryPolicy;migrate
	Mechanisms []string `json:"mechanisms,omitempty"`

	// nri says whether the agent is registered with the node's container runtime as an NRI
	// plugin, to place containers at their start: Connected or Disconnected; absent when
	// the agent is not configured for NRI (--nri-socket).
	// +optional
	// +kubebuilder:validation:Enum=Connected;Disconnected
	NRI string `json:"nri,omitempty"`

	// conditions: NodeRestricted, the verdict of the agent's last check that the node
	// restriction policy holds it to its own node (absent until its first answer); and,
	// with --nri-socket, NRIConnected (True while registered with the runtime, False with
	// reason NRINotConnected while not).
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// totals adds up every preference of the node: the entries of preferences and those
	// counted in omittedPreferences.
	// +optional
	Totals ReportTotals `json:"totals,omitempty"`

	// preferences has one entry per NumaPreference that selects pods on this node.
	// +optional
	// +listType=map
	// +listMapKey=namespace
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=1024
	Preferences []PreferenceReport `json:"preferences,omitempty"`

	// omittedPreferences counts the NumaPreferences that select pods on this node but have
	// no entry in preferences, which holds at most 1024: the agent keeps as many entries
	// as fit, taking each namespace's in turn (in name order within a namespace), and
	// counts the rest here rather than have the whole report refused. A preference
	// missing from a report whose omittedPreferences is not 0 may be one of them: the
	// summary then says that node's state is unknown.
	// +optional
	// +kubebuilder:validation:Minimum=0
	OmittedPreferences int32 `json:"omittedPreferences,omitempty"`
}

// MaxReportPreferences bounds a node report's preferences: the MaxItems of its field
// above, which must say the same number. Entries past it count in omittedPreferences.
const MaxReportPreferences = 1024

// MaxEntryCount bounds every count of a report's entry: pods, containers, tasks and each
// reason's count. The summarizer adds up no entry past it (reason InvalidReport), so one
// node cannot make a preference's sums as large as it likes. It is the kernel's
// PID_MAX_LIMIT on 64-bit, 4,194,304 (2^22), past which pid_max cannot be raised: every
// task of a node, thread or process, holds one of those pids, so a node with 300,000
// threads counts well within it, and its pods and containers are far fewer than its tasks.
// A sum over 5,000 nodes can still pass 2^31-1: the summarizer adds in int64 and stores at
// most math.MaxInt32.
const MaxEntryCount = 1 << 22

// ReportTotals adds up a node's preference entries, omitted ones included.
type ReportTotals struct {
	// preferences counts the preferences, omitted ones included.
	// +optional
	Preferences int32 `json:"preferences,omitempty"`
	// pods governed by some preference on this node.
	// +optional
	Pods int32 `json:"pods,omitempty"`
	// tasks that have their preferred node.
	// +optional
	Tasks int32 `json:"tasks,omitempty"`
	// problems counts containers skipped, refused or without effect.
	// +optional
	Problems int32 `json:"problems,omitempty"`
}

// PreferenceReport is what one node's agent did for one NumaPreference.
type PreferenceReport struct {
	// namespace and name of the NumaPreference.
	// +required
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace"`
	// +required
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// generation of the NumaPreference the agent acted on.
	// +optional
	Generation int64 `json:"generation,omitempty"`
	// pods governed by this preference on the node.
	// +optional
	Pods int32 `json:"pods,omitempty"`
	// containers placed at their preferred node.
	// +optional
	Containers int32 `json:"containers,omitempty"`
	// tasks (threads) that have their preferred node.
	// +optional
	Tasks int32 `json:"tasks,omitempty"`
	// podsByNode counts pods by the NUMA node chosen for them.
	// +optional
	// +listType=map
	// +listMapKey=node
	// +kubebuilder:validation:MaxItems=64
	PodsByNode []NodeCount `json:"podsByNode,omitempty"`
	// skipped counts containers not placed, by reason (MemoryPinnedElsewhere,
	// NodeNotPresent, KernelUnsupported, OverriddenByAnnotation, OverriddenByPreference, ...).
	// +optional
	// +listType=map
	// +listMapKey=reason
	// +kubebuilder:validation:MaxItems=16
	Skipped []ReasonCount `json:"skipped,omitempty"`
	// failed counts tasks the kernel refused, by reason (PermissionDenied, KernelError).
	// +optional
	// +listType=map
	// +listMapKey=reason
	// +kubebuilder:validation:MaxItems=16
	Failed []ReasonCount `json:"failed,omitempty"`
	// ineffective counts placed containers on which the kernel does not act, by reason
	// (NumaBalancingDisabled).
	// +optional
	// +listType=map
	// +listMapKey=reason
	// +kubebuilder:validation:MaxItems=16
	Ineffective []ReasonCount `json:"ineffective,omitempty"`
	// placedAtStart counts, of containers, those placed at their start: through the
	// container runtime's NRI, before their first instruction. The others were placed after
	// they started (through the API's pod status, a fork event or a rescan), or before this
	// agent started.
	// +optional
	// +kubebuilder:validation:Minimum=0
	PlacedAtStart int32 `json:"placedAtStart,omitempty"`
	// memoryPolicy counts, of containers, those whose init holds the memory policy of their
	// home, which the runtime gave at their creation (mechanism memoryPolicy).
	// +optional
	// +kubebuilder:validation:Minimum=0
	MemoryPolicy int32 `json:"memoryPolicy,omitempty"`
	// migrated counts, of containers, those whose pages the agent moved to their home
	// (mechanism migrate: spec.pageMigration).
	// +optional
	// +kubebuilder:validation:Minimum=0
	Migrated int32 `json:"migrated,omitempty"`
	// pagesMigrated counts the pages the agent moved to their home for this preference's
	// containers on the node, since it started or the container's request began.
	// +optional
	// +kubebuilder:validation:Minimum=0
	PagesMigrated int64 `json:"pagesMigrated,omitempty"`
	// pagesNotMigrated counts the pages the kernel did not move (the home node full, pages
	// busy or pinned), at each try.
	// +optional
	// +kubebuilder:validation:Minimum=0
	PagesNotMigrated int64 `json:"pagesNotMigrated,omitempty"`
}

// NodeCount counts pods for one NUMA node.
type NodeCount struct {
	// node is the NUMA node id.
	// +required
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1023
	Node int32 `json:"node"`
	// pods that prefer it.
	// +required
	// +kubebuilder:validation:Minimum=0
	Pods int32 `json:"pods"`
}

// NumaNodeReportList is a list of NumaNodeReport.
// +kubebuilder:object:root=true
type NumaNodeReportList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NumaNodeReport `json:"items"`
}

func init() {
	SchemeBuilder.Register(&NumaNodeReport{}, &NumaNodeReportList{})
}
