package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Annotations a pod can carry to choose its NUMA node without any NumaPreference. They win
// over every NumaPreference that selects the pod.
const (
	// AnnotationPreferredNode applies to every app container of the pod: "<node id>".
	AnnotationPreferredNode = "numapref.io/preferred-node"
	// AnnotationPreferredNodePrefix + "<container name>" applies to one container (init
	// containers included) and wins over AnnotationPreferredNode.
	AnnotationPreferredNodePrefix = AnnotationPreferredNode + "."
)

// PlacementMode says how the preferred node is chosen.
// +kubebuilder:validation:Enum=Static
type PlacementMode string

const (
	// PlacementModeStatic prefers the node given in spec.node.
	PlacementModeStatic PlacementMode = "Static"
)

// MaxNUMANodeID is the highest node id Linux can have (MAX_NUMNODES is at most 1024).
const MaxNUMANodeID = 1023

// NumaPreferenceSpec says which pods should prefer which NUMA node.
// +kubebuilder:validation:XValidation:rule="self.mode != 'Static' || has(self.node)",message="mode Static needs spec.node"
type NumaPreferenceSpec struct {
	// selector picks pods in this namespace. It must not be empty: an empty selector would
	// give every pod of the namespace a NUMA home.
	// +required
	// +kubebuilder:validation:XValidation:rule="(has(self.matchLabels) && size(self.matchLabels) > 0) || (has(self.matchExpressions) && size(self.matchExpressions) > 0)",message="selector must not be empty: it would select every pod in the namespace"
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.all(e, e.operator in ['In', 'NotIn', 'Exists', 'DoesNotExist'])",message="selector operators must be In, NotIn, Exists or DoesNotExist"
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.all(e, (e.operator in ['In', 'NotIn']) == (has(e.values) && size(e.values) > 0))",message="selector values must be given for In and NotIn, and only for them"
	Selector metav1.LabelSelector `json:"selector"`

	// containers names the containers to place. Empty means every app container; init
	// containers (sidecars too) are placed only when named here.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Containers []string `json:"containers,omitempty"`

	// mode says how the preferred node is chosen. Only Static exists today.
	// +optional
	// +kubebuilder:default=Static
	Mode PlacementMode `json:"mode,omitempty"`

	// node is the preferred NUMA node id on every host the selected pods run on.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1023
	Node *int32 `json:"node,omitempty"`
}

// Condition types of a NumaPreference.
const (
	// ConditionReady is True when every selected container on every node has its preference.
	ConditionReady = "Ready"
	// ConditionDegraded is True when some selected container could not get its preference.
	ConditionDegraded = "Degraded"
	// ConditionConflict is True when some selected pod follows another preference instead.
	ConditionConflict = "Conflict"
)

// Reasons used in conditions, node entries and pod Events.
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
	ReasonStatusTruncated        = "StatusTruncated"
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

// NodeStatus is what the agent on one Kubernetes node did for this preference. Each agent
// owns its own entry (server-side apply, field manager per node) and removes it when it
// has nothing left to report.
type NodeStatus struct {
	// nodeName is the Kubernetes node.
	// +required
	// +kubebuilder:validation:MaxLength=253
	NodeName string `json:"nodeName"`
	// pods governed by this preference on the node.
	// +optional
	Pods int32 `json:"pods,omitempty"`
	// containers placed at the preferred node.
	// +optional
	Containers int32 `json:"containers,omitempty"`
	// tasks (threads) that have the preferred node.
	// +optional
	Tasks int32 `json:"tasks,omitempty"`
	// skipped counts containers not placed, by reason (MemoryPinnedElsewhere, NodeNotPresent,
	// KernelUnsupported, OverriddenByAnnotation, OverriddenByPreference, ...).
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
}

// Summary adds up the node entries; printer columns show it.
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
}

// MaxNodeEntries bounds status.nodes. An entry is about 150 bytes, so the status stays
// under ~1 MiB even at the cap; entries exist only for nodes that run selected pods, and a
// node past the cap reports through Events and metrics instead (reason StatusTruncated).
const MaxNodeEntries = 4096

// NumaPreferenceStatus is written by two kinds of writers that never overlap: each node's
// agent applies its own entry of nodes; one elected agent computes summary and conditions.
type NumaPreferenceStatus struct {
	// observedGeneration is the generation the summary and conditions were computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions: Ready, Degraded, Conflict.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// summary adds up nodes.
	// +optional
	Summary Summary `json:"summary,omitempty"`

	// nodes has one entry per Kubernetes node that runs pods of this preference.
	// +optional
	// +listType=map
	// +listMapKey=nodeName
	// +kubebuilder:validation:MaxItems=4096
	Nodes []NodeStatus `json:"nodes,omitempty"`
}

// NumaPreference gives the selected pods a soft NUMA home: on each host, every task of their
// containers gets a forced preferred NUMA node that the scheduler and NUMA balancing follow.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=numapref,categories=numapref
// +kubebuilder:printcolumn:name="Node-ID",type=integer,JSONPath=`.spec.node`
// +kubebuilder:printcolumn:name="Pods",type=integer,JSONPath=`.status.summary.pods`
// +kubebuilder:printcolumn:name="Tasks",type=integer,JSONPath=`.status.summary.tasks`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
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
