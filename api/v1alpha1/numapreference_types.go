// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Annotations a pod can carry to choose its NUMA node without any NumaPreference. They win
// over every NumaPreference that selects the pod.
const (
	// AnnotationPreferredNode applies to every app container of the pod: a node id ("1")
	// or an automatic mode ("Spread", "FollowCPUs", "MostFreeMemory", "FollowDevices").
	// Spread spreads the pods of one namespace on one host that carry the same value.
	AnnotationPreferredNode = "numapref.io/preferred-node"
	// AnnotationPreferredNodePrefix + "<container name>" applies to one container (init
	// containers included) and wins over AnnotationPreferredNode.
	AnnotationPreferredNodePrefix = AnnotationPreferredNode + "."
	// AnnotationMemoryPolicy says, for every container the pod's annotations place, whether
	// a memory policy is given at creation: Auto, AtCreation or Never (spec.memoryPolicy).
	AnnotationMemoryPolicy = "numapref.io/memory-policy"
	// AnnotationFollowResourceNames and AnnotationFollowDeviceClassNames name, for every
	// container the pod's annotations place in mode FollowDevices, the devices it follows:
	// comma-separated device plugin resource names ("example.com/gpu") and DRA device
	// class names (spec.devices). Without either, every device is followed.
	AnnotationFollowResourceNames    = "numapref.io/follow-resource-names"
	AnnotationFollowDeviceClassNames = "numapref.io/follow-device-class-names"
	// AnnotationPageMigration says, for every container the pod's annotations place, whether
	// the pages it already has are moved to its home: Never, Once or FollowHome
	// (spec.pageMigration).
	AnnotationPageMigration = "numapref.io/page-migration"
)

// PageMigration says whether the pages a selected container already has are moved to its
// home node (move_pages(2), by the node's agent, at the rate the node allows).
// +kubebuilder:validation:Enum=Never;Once;FollowHome
type PageMigration string

const (
	// PageMigrationNever never moves pages: only the mechanisms that steer what comes next
	// (the prctl, a memory policy at creation) act. Never, not Off: YAML 1.1 (kubectl's
	// decoder) reads an unquoted Off as the boolean false, which the API then refuses.
	PageMigrationNever PageMigration = "Never"
	// PageMigrationOnce moves a running container's pages to its home when the node's
	// agent first gives it that home (after it is selected, or after the agent starts).
	PageMigrationOnce PageMigration = "Once"
	// PageMigrationFollowHome moves them then, and again each time the container's home
	// changes (a changed spec, FollowCPUs following a new cpuset).
	PageMigrationFollowHome PageMigration = "FollowHome"
)

// MemoryPolicy says whether a selected container gets a memory policy (set_mempolicy(2))
// on its home when the runtime creates it.
// +kubebuilder:validation:Enum=Auto;AtCreation;Never
type MemoryPolicy string

const (
	// MemoryPolicyAuto gives the policy at creation on the nodes whose kernel cannot set a
	// preferred node (no PR_PREFERRED_NID): there it is what can take effect. On a node with
	// the prctl the prctl alone acts.
	MemoryPolicyAuto MemoryPolicy = "Auto"
	// MemoryPolicyAtCreation gives the policy at creation on every node, beside the prctl
	// where there is one.
	MemoryPolicyAtCreation MemoryPolicy = "AtCreation"
	// MemoryPolicyNever never gives a memory policy.
	MemoryPolicyNever MemoryPolicy = "Never"
)

// PlacementMode says how the preferred node is chosen on each host.
// +kubebuilder:validation:Enum=Static;Spread;FollowCPUs;MostFreeMemory;FollowDevices
type PlacementMode string

const (
	// PlacementModeStatic prefers the node given in spec.node, on every host.
	PlacementModeStatic PlacementMode = "Static"
	// PlacementModeSpread spreads the selected pods of each host over its NUMA nodes: one
	// node per pod, the lightest node (by CPU requests) takes the next pod, and a running
	// pod keeps its node.
	PlacementModeSpread PlacementMode = "Spread"
	// PlacementModeFollowCPUs prefers, per container, the node that holds most of the
	// container's effective cpuset.cpus, and follows it when the cpuset changes.
	PlacementModeFollowCPUs PlacementMode = "FollowCPUs"
	// PlacementModeMostFreeMemory prefers the node with the most free memory when a pod is
	// first placed, and keeps that choice.
	PlacementModeMostFreeMemory PlacementMode = "MostFreeMemory"
	// PlacementModeFollowDevices prefers, per container, the node of the devices the
	// kubelet allocated to it (device plugins' and DRA's, as its PodResources API reports
	// them): that node when every device is on one, else the node with the most devices,
	// then the lowest id. spec.devices narrows the devices followed.
	PlacementModeFollowDevices PlacementMode = "FollowDevices"
)

// Bounds of spec.devices: resource names are qualified names (a 253-character DNS prefix,
// '/', a 63-character name), device class names DNS subdomains.
const (
	MaxFollowedNames         = 16
	MaxResourceNameLength    = 317
	MaxDeviceClassNameLength = 253
)

// DeviceSelection names the devices mode FollowDevices follows: a device counts when
// either list names it.
// +kubebuilder:validation:XValidation:rule="(has(self.resourceNames) && size(self.resourceNames) > 0) || (has(self.deviceClassNames) && size(self.deviceClassNames) > 0)",message="spec.devices must name a resource or a device class: leave it out to follow every device"
type DeviceSelection struct {
	// resourceNames are device plugins' extended resource names (example.com/gpu), as the
	// container's resources request them.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=317
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`
	ResourceNames []string `json:"resourceNames,omitempty"`
	// deviceClassNames are DRA DeviceClasses: a device allocated for a claim request of one
	// of these classes counts.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=253
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	DeviceClassNames []string `json:"deviceClassNames,omitempty"`
}

// MaxNUMANodeID is the highest node id Linux can have (MAX_NUMNODES is at most 1024).
const MaxNUMANodeID = 1023

// NumaPreferenceSpec says which pods should prefer which NUMA node.
// +kubebuilder:validation:XValidation:rule="self.mode != 'Static' || has(self.node)",message="mode Static needs spec.node: the NUMA node id every host should prefer"
// +kubebuilder:validation:XValidation:rule="self.mode == 'Static' || !has(self.node)",message="spec.node is only for mode Static: the automatic modes choose the node on each host (restrict them with spec.nodes)"
// +kubebuilder:validation:XValidation:rule="self.mode != 'Static' || !has(self.nodes)",message="spec.nodes restricts the automatic modes: mode Static uses spec.node alone"
// +kubebuilder:validation:XValidation:rule="self.mode == 'FollowDevices' || !has(self.devices)",message="spec.devices is only for mode FollowDevices: it names the devices whose NUMA node the containers follow"
type NumaPreferenceSpec struct {
	// selector picks pods in this namespace. It must not be empty: an empty selector would
	// give every pod of the namespace a NUMA home.
	// Its bounds (LabelSelector) keep the largest NumaPreference small: every agent caches
	// every NumaPreference of the cluster.
	// +required
	// +kubebuilder:validation:XValidation:rule="(has(self.matchLabels) && size(self.matchLabels) > 0) || (has(self.matchExpressions) && size(self.matchExpressions) > 0)",message="selector must not be empty: it would select every pod in the namespace"
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.all(e, e.operator in ['In', 'NotIn', 'Exists', 'DoesNotExist'])",message="selector operators must be In, NotIn, Exists or DoesNotExist"
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.all(e, (e.operator in ['In', 'NotIn']) == (has(e.values) && size(e.values) > 0))",message="selector values must be given for In and NotIn, and only for them"
	Selector LabelSelector `json:"selector"`

	// containers names the containers to place. Empty means every app container; init
	// containers (sidecars too) are placed only when named here.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Containers []string `json:"containers,omitempty"`

	// mode says how the preferred node is chosen on each host: Static (spec.node), Spread,
	// FollowCPUs, MostFreeMemory or FollowDevices.
	// +optional
	// +kubebuilder:default=Static
	Mode PlacementMode `json:"mode,omitempty"`

	// node is the preferred NUMA node id on every host the selected pods run on (mode
	// Static only).
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1023
	Node *int32 `json:"node,omitempty"`

	// nodes restricts the automatic modes to these NUMA node ids; unset allows every node.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:XValidation:rule="size(self) > 0",message="spec.nodes must not be empty: leave it out to allow every NUMA node"
	// +kubebuilder:validation:items:Minimum=0
	// +kubebuilder:validation:items:Maximum=1023
	Nodes []int32 `json:"nodes,omitempty"`

	// devices narrows the devices mode FollowDevices follows (FollowDevices only); unset,
	// every device the kubelet allocated to the container counts.
	// +optional
	Devices *DeviceSelection `json:"devices,omitempty"`

	// memoryPolicy says whether the runtime gives each selected container a memory policy
	// on its home when it creates the container (through NRI: MPOL_PREFERRED_MANY with
	// MPOL_F_NUMA_BALANCING where the kernel takes it, which keeps NUMA balancing scanning
	// the task, else MPOL_PREFERRED). Never MPOL_BIND, never cpuset.mems: nothing hard.
	// Auto (the default) gives it on the nodes whose kernel lacks the preferred-node
	// prctl, AtCreation on every node, Never on none. A container that runs already keeps the
	// policy it was created with (reason PolicyAtCreationOnly): no policy can be set on a
	// running process from outside.
	// +optional
	// +kubebuilder:default=Auto
	MemoryPolicy MemoryPolicy `json:"memoryPolicy,omitempty"`

	// pageMigration says whether the pages a selected container already has are moved to
	// its home by the node's agent: Never (the default) moves none, Once moves them when the agent first
	// gives the container its home, FollowHome then and again each time the home changes.
	// It is what reaches memory a running container allocated before it was selected, on
	// every kernel: the moves are bounded by the node's rate (the agent's
	// --page-migration-rate), never go against a cpuset.mems pin, and are not undone when
	// the preference is deleted (the pages stay where they were moved). A node whose agent
	// does not move pages says so in its report (mechanism migrate absent).
	// +optional
	// +kubebuilder:default=Never
	PageMigration PageMigration `json:"pageMigration,omitempty"`
}

// Bounds of a NumaPreference's selector, as its markers state them. A label key is at most
// 317 bytes (a 253-byte DNS prefix, '/', a 63-byte name) and a label value at most 63, as
// Kubernetes labels are.
const (
	MaxSelectorLabels      = 16
	MaxSelectorExpressions = 8
	MaxSelectorValues      = 16
	MaxLabelKeyLength      = 317
	MaxLabelValueLength    = 63
)

// LabelSelector is metav1.LabelSelector with bounds on every map, list and string, which
// the apiserver enforces: without them one tenant's NumaPreference of a megabyte is
// accepted, and cached by every agent. Its JSON is metav1.LabelSelector's.
// +structType=atomic
type LabelSelector struct {
	// matchLabels selects pods that have all these labels: at most 16, keys of at most 317
	// characters and values of at most 63.
	// +optional
	// +kubebuilder:validation:MaxProperties=16
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) <= 317)",message="selector label keys must be at most 317 characters (a 253-character prefix, '/', a 63-character name)"
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(self[k]) <= 63)",message="selector label values must be at most 63 characters"
	MatchLabels map[string]string `json:"matchLabels,omitempty"`
	// matchExpressions selects pods that meet all these requirements: at most 8.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	MatchExpressions []LabelSelectorRequirement `json:"matchExpressions,omitempty"`
}

// LabelSelectorRequirement is metav1.LabelSelectorRequirement with bounds; the two
// convert into each other.
type LabelSelectorRequirement struct {
	// key is the label key the requirement applies to.
	// +required
	// +kubebuilder:validation:MaxLength=317
	Key string `json:"key"`
	// operator is In, NotIn, Exists or DoesNotExist (the selector's rules check it).
	// +required
	Operator metav1.LabelSelectorOperator `json:"operator"`
	// values: at most 16 label values of at most 63 characters, for In and NotIn only.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=63
	Values []string `json:"values,omitempty"`
}

// Condition types of a NumaPreference.
const (
	// ConditionReady is True when every selected container on every node has its preference.
	ConditionReady = "Ready"
	// ConditionDegraded is True when some selected container could not get its preference.
	ConditionDegraded = "Degraded"
	// ConditionConflict is True when some selected pod follows another preference instead.
	ConditionConflict = "Conflict"
	// ConditionEffective is False when placed containers run where the kernel ignores the
	// preference (kernel.numa_balancing disabled on their node).
	ConditionEffective = "Effective"
)

// ReasonCount counts containers or tasks for one reason.
type ReasonCount struct {
	// reason is a CamelCase reason such as MemoryPinnedElsewhere.
	// +required
	// +kubebuilder:validation:MaxLength=64
	Reason string `json:"reason"`
	// count is how many.
	// +required
	// +kubebuilder:validation:Minimum=0
	Count int32 `json:"count"`
}

// Summary adds up the node reports; printer columns show it.
type Summary struct {
	// nodes that report pods for this preference.
	// +optional
	Nodes int32 `json:"nodes,omitempty"`
	// pods governed by this preference.
	// +optional
	Pods int32 `json:"pods,omitempty"`
	// containers placed.
	// +optional
	Containers int32 `json:"containers,omitempty"`
	// tasks that have the preferred node.
	// +optional
	Tasks int32 `json:"tasks,omitempty"`
	// memoryPolicy counts, of containers, those whose init holds their home's memory
	// policy, given at their creation (mechanism memoryPolicy).
	// +optional
	MemoryPolicy int32 `json:"memoryPolicy,omitempty"`
}

// NodeProblem names one Kubernetes node where some selected containers did not get their
// preference, or got it without effect, and why.
type NodeProblem struct {
	// nodeName is the Kubernetes node; its NumaNodeReport has the detail.
	// +required
	// +kubebuilder:validation:MaxLength=253
	NodeName string `json:"nodeName"`
	// reason is the node's most frequent problem (MemoryPinnedElsewhere, KernelUnsupported,
	// NumaBalancingDisabled, ...).
	// +required
	// +kubebuilder:validation:MaxLength=64
	Reason string `json:"reason"`
	// count adds up the node's problems, all reasons together: containers skipped or
	// without effect, and tasks the kernel refused.
	// +required
	// +kubebuilder:validation:Minimum=0
	Count int32 `json:"count"`
}

// MaxProblemNodes bounds status.problemNodes: the status of a preference stays the same
// small size on a cluster of 10 nodes or 5,000. The full list is the NumaNodeReports
// (kubectl numapref status lists them).
const MaxProblemNodes = 10

// NumaPreferenceStatus is written only by the elected summarizer, from the NumaNodeReports
// of the node agents, at most once per preference every few seconds.
type NumaPreferenceStatus struct {
	// observedGeneration is the generation the summary and conditions were computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions: Ready, Degraded, Conflict, Effective.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// summary adds up the node reports.
	// +optional
	Summary Summary `json:"summary,omitempty"`

	// problemNodes names up to 10 nodes with the most containers that have a problem, most
	// first (ties by name).
	// +optional
	// +listType=map
	// +listMapKey=nodeName
	// +kubebuilder:validation:MaxItems=10
	ProblemNodes []NodeProblem `json:"problemNodes,omitempty"`
}

// NumaPreference gives the selected pods a soft NUMA home: on each host, every task of their
// containers gets a forced preferred NUMA node that the scheduler and NUMA balancing follow.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=numapref,categories=numa
// +kubebuilder:printcolumn:name="Mode",type=string,JSONPath=`.spec.mode`
// +kubebuilder:printcolumn:name="Node-ID",type=integer,JSONPath=`.spec.node`
// +kubebuilder:printcolumn:name="Nodes",type=integer,JSONPath=`.status.summary.nodes`,priority=1
// +kubebuilder:printcolumn:name="Pods",type=integer,JSONPath=`.status.summary.pods`
// +kubebuilder:printcolumn:name="Tasks",type=integer,JSONPath=`.status.summary.tasks`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Effective",type=string,JSONPath=`.status.conditions[?(@.type=="Effective")].status`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type NumaPreference struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec NumaPreferenceSpec `json:"spec"`
	// +optional
	Status NumaPreferenceStatus `json:"status,omitempty"`
}

// NumaPreferenceList is a list of NumaPreference.
// +kubebuilder:object:root=true
type NumaPreferenceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NumaPreference `json:"items"`
}

func init() {
	SchemeBuilder.Register(&NumaPreference{}, &NumaPreferenceList{})
}
