// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package v1alpha1

import (
	"maps"
	"slices"
)

// Reasons used in conditions, node entries and pod Events. Every one has a row in
// reasonTable below, which the node's report, the summary and the pod Events all read;
// reasons_test.go fails when a Reason constant has no row.
const (
	ReasonApplied                = "Applied"
	ReasonNoMatchingPods         = "NoMatchingPods"
	ReasonPartiallyApplied       = "PartiallyApplied"
	ReasonNoProblems             = "NoProblems"
	ReasonNoConflict             = "NoConflict"
	ReasonMemoryPinnedElsewhere  = "MemoryPinnedElsewhere"
	ReasonNodeNotPresent         = "NodeNotPresent"
	ReasonKernelUnsupported      = "KernelUnsupported"
	ReasonContainerNotRunning    = "ContainerNotRunning"
	ReasonContainerNotFound      = "ContainerNotFound"
	ReasonCgroupError            = "CgroupError"
	ReasonInvalidAnnotation      = "InvalidAnnotation"
	ReasonOverriddenByAnnotation = "OverriddenByAnnotation"
	ReasonOverriddenByPreference = "OverriddenByPreference"
	ReasonPermissionDenied       = "PermissionDenied"
	ReasonKernelError            = "KernelError"
	ReasonCPUsNotPinned          = "CPUsNotPinned"
	ReasonCPUsPinnedElsewhere    = "CPUsPinnedElsewhere"
	ReasonNumaBalancingDisabled  = "NumaBalancingDisabled"
	ReasonNumaBalancingEnabled   = "NumaBalancingEnabled"
	ReasonNoPlacedContainers     = "NoPlacedContainers"
	ReasonLedgerError            = "LedgerError"
	// ReasonLedgerDamaged: the agent found its ledger damaged at start (a Warning Event on
	// the Node, ledgerDamaged in the node's report): values it set before may stay.
	ReasonLedgerDamaged = "LedgerDamaged"
	// ReasonMirrorAnnotationIgnored: a pod carries the mirror-pod annotation but is not
	// owned by its Node, as the kubelet's mirror pods are; its own UID names its cgroup.
	ReasonMirrorAnnotationIgnored = "MirrorAnnotationIgnored"
	// ReasonNodeRestrictionMissing: the API accepted an agent's dry-run write that the node
	// restriction policy refuses (ConditionNodeRestricted False; a Warning Event on the
	// Node, the metric numapref_node_restriction_missing).
	ReasonNodeRestrictionMissing = "NodeRestrictionMissing"
	// ReasonNodeRestrictionEnforced: the API refused the agent's dry-run writes that the
	// policy refuses (ConditionNodeRestricted True on the node's report).
	ReasonNodeRestrictionEnforced = "NodeRestrictionEnforced"
	// ReasonNodeRestrictionUnproven: the API's answers to the agent's dry-run writes prove
	// neither that the policy refuses them nor that it accepts them (ConditionNodeRestricted
	// Unknown; the metric numapref_node_restriction_missing is -1).
	ReasonNodeRestrictionUnproven = "NodeRestrictionUnproven"
	// ReasonNRIConnected and ReasonNRINotConnected: the agent, configured for NRI
	// (--nri-socket), is or is not registered with the container runtime
	// (ConditionNRIConnected on the node's report, and the node label numapref.io/nri).
	ReasonNRIConnected    = "NRIConnected"
	ReasonNRINotConnected = "NRINotConnected"
	// ReasonTooManyTasks: the container has more tasks than its share of what the node's
	// agent keeps per task (ledger entries, pidfds): it alone is not placed.
	ReasonTooManyTasks = "TooManyTasks"
	// ReasonPolicyAtCreationOnly: the container ran before it was selected (or before the
	// agent was the runtime's NRI plugin), so it has no memory policy on its home: a policy
	// can only be given when the runtime creates a container.
	ReasonPolicyAtCreationOnly = "PolicyAtCreationOnly"
	// ReasonMemoryPolicyUnsupported: the container should hold a memory policy, but this
	// node cannot give one (the agent is not the runtime's NRI plugin, or the kernel takes
	// no soft policy), or the runtime was asked and did not apply it.
	ReasonMemoryPolicyUnsupported = "MemoryPolicyUnsupported"
	// ReasonMigratingPages: the agent is moving the container's pages to its home
	// (spec.pageMigration) and nothing else gives it its home on this node yet.
	ReasonMigratingPages = "MigratingPages"
	// ReasonPagesNotMoved: the kernel moved none of the container's pages to its home
	// after the agent's last try (the home node full, the pages busy or pinned), and
	// nothing else gives it its home on this node.
	ReasonPagesNotMoved = "PagesNotMoved"
	// ReasonInvalidReport: the summarizer did not add up a node's entry for a preference
	// (a reason this table does not know, or a count outside 0..MaxEntryCount); the node is
	// named in the preference's status.problemNodes with this reason.
	ReasonInvalidReport = "InvalidReport"
	// The reasons of mode FollowDevices (the node of the container's devices, as the
	// kubelet's PodResources API reports them): the kubelet's answer is awaited
	// (DeviceAllocationsPending), could not be had (DeviceAllocationsUnreadable), names no
	// device to follow (NoDevicesAllocated), a device without a NUMA node
	// (DevicesWithoutTopology), or devices on no node the container may prefer
	// (DevicesOnOtherNodes). A device on a node the host lacks is NodeNotPresent.
	ReasonDeviceAllocationsPending    = "DeviceAllocationsPending"
	ReasonDeviceAllocationsUnreadable = "DeviceAllocationsUnreadable"
	ReasonNoDevicesAllocated          = "NoDevicesAllocated"
	ReasonDevicesWithoutTopology      = "DevicesWithoutTopology"
	ReasonDevicesOnOtherNodes         = "DevicesOnOtherNodes"
	// ReasonTooManyPreferences: the preference's namespace holds more NumaPreferences than
	// numapref keeps per namespace (--max-preferences-per-namespace); this one is not among
	// the oldest that are kept, so no agent applies it (Ready False, written by the
	// summarizer; the metric numapref_preferences_held_back on every agent).
	ReasonTooManyPreferences = "TooManyPreferences"
	// ReasonDrained and ReasonUndoIncomplete: the agent's drain after its DaemonSet was
	// deleted put every value back, or left some (ConditionDrained on the node's report).
	ReasonDrained        = "Drained"
	ReasonUndoIncomplete = "UndoIncomplete"
)

// ReasonInfo says what a reason means to those who count it and those who tell users.
// A skipped container whose reason is neither a Problem nor a Conflict is waiting
// (ContainerNotRunning): it makes Ready False without making Degraded True.
// +kubebuilder:object:generate=false
type ReasonInfo struct {
	// Problem: the container or task needs a look. It counts in the report's
	// totals.problems, in status.problemNodes and in kubectl numapref status, and, unless
	// Ineffective, in the Degraded condition.
	Problem bool
	// Ineffective: the container has its preferred node but the kernel ignores it. It
	// feeds the Effective condition instead of Degraded.
	Ineffective bool
	// Conflict: another source governs the container. It feeds the Conflict condition
	// (and a Normal Conflict Event), never Degraded.
	Conflict bool
	// Warning: the pod gets a Warning Event with this reason.
	Warning bool
	// Meaning is one line for users.
	Meaning string
}

// reasonTable is the one place that says what each reason means.
var reasonTable = map[string]ReasonInfo{
	ReasonApplied:          {Meaning: "the container's tasks have their preferred NUMA node (a Normal Event per pod; Ready's reason when all have it)"},
	ReasonNoMatchingPods:   {Meaning: "Ready is False: no pod the preference governs runs on a node with an agent"},
	ReasonPartiallyApplied: {Meaning: "Ready is False: some containers are not placed yet, have a problem, or their node has not acted on the latest spec"},
	ReasonNoProblems:       {Meaning: "Degraded is False: no container was refused"},
	ReasonNoConflict:       {Meaning: "Conflict is False: no selected container follows another source"},
	ReasonMemoryPinnedElsewhere: {Problem: true, Warning: true,
		Meaning: "the container's cpuset.mems leaves out the node it would prefer, which would fight it"},
	ReasonNodeNotPresent: {Problem: true, Warning: true,
		Meaning: "the preferred NUMA node (or every node spec.nodes allows, or a followed device's node) is not online on this host"},
	ReasonKernelUnsupported: {Problem: true, Warning: true,
		Meaning: "this host's kernel backend cannot set a preferred NUMA node"},
	ReasonContainerNotRunning: {Meaning: "the container is not running yet, or has stopped: it is placed when it runs"},
	ReasonContainerNotFound: {Problem: true, Warning: true,
		Meaning: "the container's cgroup is not on this host (no Warning for a terminating pod, whose cgroups go first)"},
	ReasonCgroupError: {Problem: true, Warning: true,
		Meaning: "the container's cgroup could not be read"},
	ReasonInvalidAnnotation: {Problem: true, Warning: true,
		Meaning: "the pod's numapref.io/preferred-node annotation is neither a node id nor a mode"},
	ReasonOverriddenByAnnotation: {Conflict: true,
		Meaning: "the pod's annotation, not this preference, chooses the container's node"},
	ReasonOverriddenByPreference: {Conflict: true,
		Meaning: "another NumaPreference (the older, then the first by name) governs the container"},
	ReasonPermissionDenied: {Problem: true, Warning: true,
		Meaning: "the kernel refused to set some tasks' preferred node (EPERM or EACCES)"},
	ReasonKernelError: {Problem: true, Warning: true,
		Meaning: "the kernel failed to set some tasks' preferred node, for a reason other than permission"},
	ReasonCPUsNotPinned: {Problem: true, Warning: true,
		Meaning: "FollowCPUs: cpuset.cpus spans every NUMA node, so there is no node to follow"},
	ReasonCPUsPinnedElsewhere: {Problem: true, Warning: true,
		Meaning: "FollowCPUs: cpuset.cpus lies on no NUMA node the container may prefer"},
	ReasonNumaBalancingDisabled: {Problem: true, Ineffective: true, Warning: true,
		Meaning: "placed, but kernel.numa_balancing is disabled on the host, so the kernel ignores the preferred node"},
	ReasonNumaBalancingEnabled: {Meaning: "Effective is True: NUMA balancing is enabled where the placed containers run"},
	ReasonNoPlacedContainers:   {Meaning: "Effective is Unknown: no container is placed yet"},
	ReasonLedgerError: {Problem: true, Warning: true,
		Meaning: "the agent could not write its ledger, so it set no value it could not undo after a crash"},
	ReasonLedgerDamaged: {Problem: true, Warning: true,
		Meaning: "the agent found its ledger damaged, oversized or unreadable at start: values it set before may stay (a Warning Event on the Node)"},
	ReasonMirrorAnnotationIgnored: {Problem: true, Warning: true,
		Meaning: "the pod carries the mirror-pod annotation but its Node does not own it, so the annotation does not choose its cgroup"},
	ReasonNodeRestrictionMissing: {Problem: true, Warning: true,
		Meaning: "the API accepted a write of another node's report or of a foreign label that the node restriction policy refuses: an agent could write other nodes' reports and labels (a Warning Event on the Node)"},
	ReasonNodeRestrictionEnforced: {Meaning: "NodeRestricted is True on the node's report: the API refused the agent's writes outside its own node"},
	ReasonNodeRestrictionUnproven: {Problem: true,
		Meaning: "NodeRestricted is Unknown on the node's report: the API answered the agent's dry-run writes with something other than the node restriction policy's denial or an acceptance (RBAC, another admission plugin, a webhook that cannot dry-run, an error), so whether the policy holds is not known"},
	ReasonNRIConnected: {Meaning: "NRIConnected is True on the node's report: the agent is registered with the container runtime and places containers at their start"},
	ReasonNRINotConnected: {Problem: true, Warning: true,
		Meaning: "the agent is configured for NRI (--nri-socket) but not registered with the container runtime (no socket, a runtime without NRI, or a lost connection): new containers are placed only after they start (NRIConnected False on the node's report, the node label numapref.io/nri=disconnected)"},
	ReasonTooManyTasks: {Problem: true, Warning: true,
		Meaning: "the container has more tasks than one container may have placed on a node (the agent's --max-tasks-per-container): it alone is not placed, and the node's other containers keep the ledger and pidfds they share"},
	ReasonPolicyAtCreationOnly: {Problem: true,
		Meaning: "the container should have a memory policy on its home, but it was created before that was asked (or before the agent was the runtime's NRI plugin), and no policy can be set on a running process: it gets one when it is created again"},
	ReasonMemoryPolicyUnsupported: {Problem: true, Warning: true,
		Meaning: "the container should have a memory policy on its home, but this node cannot give one (the agent is not connected to the runtime through NRI, or the kernel takes no soft policy), or the runtime was asked at the container's creation and did not apply it (a runc before 1.4, a runtime that ignores linux.memoryPolicy)"},
	ReasonMigratingPages: {
		Meaning: "the agent is moving the container's pages to its home (spec.pageMigration), at the rate the node allows; nothing else gives the container its home on this node (no prctl, and no memory policy at its creation)"},
	ReasonPagesNotMoved: {Problem: true, Warning: true,
		Meaning: "the agent asked the kernel to move the container's pages to its home and none moved after its last try (the home node is full, or the pages are busy or pinned): it tries again only when the home changes"},
	ReasonDeviceAllocationsPending: {
		Meaning: "FollowDevices: the agent is asking the kubelet which devices the container has; it is placed when the answer comes"},
	ReasonDeviceAllocationsUnreadable: {Problem: true, Warning: true,
		Meaning: "FollowDevices: the kubelet's PodResources socket is absent, refused the agent, did not answer in time, or the API did not say where a DRA device is (the agent's --pod-resources-socket, the chart's podResources values): the container is not placed, the other modes are unaffected"},
	ReasonNoDevicesAllocated: {Problem: true, Warning: true,
		Meaning: "FollowDevices: the kubelet allocated the container no device of the kinds followed (spec.devices), so there is no node to follow"},
	ReasonDevicesWithoutTopology: {Problem: true, Warning: true,
		Meaning: "FollowDevices: a device followed has no NUMA node (its device plugin reports no topology, or its ResourceSlice no numaNode attribute): the agent does not guess one"},
	ReasonDevicesOnOtherNodes: {Problem: true, Warning: true,
		Meaning: "FollowDevices: the container's devices are on no NUMA node it may prefer (spec.nodes, or its cpuset.mems)"},
	ReasonInvalidReport: {Problem: true,
		Meaning: "the node's report entry for the preference has a reason this summarizer does not know or a count outside 0..MaxEntryCount (a buggy or compromised agent, or one newer than the summarizer): none of its counts is added up, and the node is named in problemNodes"},
	ReasonDrained: {Meaning: "Drained is True on the node's report: its DaemonSet was deleted (helm uninstall) and the agent put back every value it set"},
	ReasonUndoIncomplete: {Problem: true,
		Meaning: "Drained is False on the node's report: its DaemonSet was deleted and the agent could not put back every value it set (the kernel refused some tasks); it keeps trying until it is stopped, and keeps its state dir for a later agent"},
	ReasonTooManyPreferences: {Problem: true,
		Meaning: "Ready and Degraded say so: the preference's namespace holds more NumaPreferences than numapref keeps per namespace (--max-preferences-per-namespace, chart value maxPreferencesPerNamespace); the oldest are kept and applied, this one is not: every agent and the summarizer keep only its name, and it selects no pod until older ones are deleted"},
}

// unknownReason is what a reason without a row means: a problem with a Warning. A reason
// this build does not know (a newer agent's report, a constant added without its row) is
// then shown to users rather than hidden.
var unknownReason = ReasonInfo{Problem: true, Warning: true, Meaning: "a reason this version of numapref does not know"}

// KnownReason says whether reason has a row in the table. The summarizer adds up only
// report entries whose reasons are all known (InvalidReport otherwise): a reason reaches
// a condition's reason, whose pattern an arbitrary string can fail.
func KnownReason(reason string) bool {
	_, ok := reasonTable[reason]
	return ok
}

// Reasons lists every reason of the table, sorted.
func Reasons() []string {
	return slices.Sorted(maps.Keys(reasonTable))
}

// LookupReason returns what reason means; an unknown reason is a problem with a Warning.
func LookupReason(reason string) ReasonInfo {
	if info, ok := reasonTable[reason]; ok {
		return info
	}
	return unknownReason
}
