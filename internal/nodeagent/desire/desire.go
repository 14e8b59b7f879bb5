// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package desire

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/internal/nodeagent/cgroups"
	"github.com/numapref/numapref/internal/numa"
)

// Desire is what one container of a pod should get on this host.
type Desire struct {
	Pod types.NamespacedName
	// PodUID is the UID the kubelet runs the pod under, which names its cgroup
	// (cgroups.Node.PodUID): a static pod's own, not its mirror pod's. The runtime's sandbox
	// (PlaceAtStart) and the API (PlanPod) name the container alike.
	PodUID    types.UID
	Container string
	// Ref locates the container's cgroup; Ref.ContainerID is empty while it is not running.
	Ref cgroups.ContainerRef
	// Node is the preferred NUMA node of mode Static; the automatic modes leave it -1 and
	// the engine chooses on this host (plan.Result.Node).
	Node int
	// Placement says how the node is chosen.
	Placement Placement
	// MemoryPolicy says whether the container gets a memory policy on its home at
	// creation: the NumaPreference's spec.memoryPolicy, or the pod's
	// numapref.io/memory-policy annotation for a container its annotations place. Empty is
	// Auto.
	MemoryPolicy numav1.MemoryPolicy `json:",omitempty"`
	// PageMigration says whether the pages the container already has are moved to its
	// home: the NumaPreference's spec.pageMigration, or the pod's
	// numapref.io/page-migration annotation for a container its annotations place. Empty
	// is Never.
	PageMigration numav1.PageMigration `json:",omitempty"`
	// Preference names the NumaPreference the node comes from; empty for an annotation.
	Preference string
	// Refusal is a reason not to act at all (InvalidAnnotation, ContainerNotRunning), and
	// Message says more; empty to act. (Named Skip in the persisted desired state.)
	Refusal string `json:"Skip"`
	Message string
}

// Placement says how a container's NUMA node is chosen on this host. It is comparable, as
// Desire is.
type Placement struct {
	Mode numav1.PlacementMode
	// Allowed restricts the automatic modes to these node ids, as a sorted list ("0,2");
	// empty allows every node.
	Allowed string
	// Group names the pods placed together: the pods of one Spread group are spread over
	// the nodes, and a sticky choice (Spread, MostFreeMemory) is kept per pod and group.
	// "NumaPreference <ns>/<name>", or "annotation <ns>/<value>" for a pod annotation.
	Group string
	// Weight is what a pod weighs in a Spread: its app containers' CPU requests in
	// millicores, or 1000 (one CPU) when it requests none.
	Weight int64
	// Devices narrows the devices FollowDevices follows; the zero value follows every one.
	Devices DeviceFilter
}

// DeviceFilter names the devices FollowDevices follows, as sorted comma-separated lists
// (comparable, as Placement is): device plugin resource names and DRA device class
// names. Both empty follows every device.
type DeviceFilter struct {
	ResourceNames    string `json:",omitempty"`
	DeviceClassNames string `json:",omitempty"`
}

// NewDeviceFilter is the filter of these resource and device class names.
func NewDeviceFilter(resourceNames, deviceClassNames []string) DeviceFilter {
	return DeviceFilter{ResourceNames: joinSorted(resourceNames), DeviceClassNames: joinSorted(deviceClassNames)}
}

// All says whether the filter follows every device.
func (f DeviceFilter) All() bool { return f == DeviceFilter{} }

// Follows says whether a device of device plugin resource resourceName, or of DRA device
// class deviceClassName, is followed ("" for the kind a device is not).
func (f DeviceFilter) Follows(resourceName, deviceClassName string) bool {
	if f.All() {
		return true
	}
	return resourceName != "" && slices.Contains(strings.Split(f.ResourceNames, ","), resourceName) ||
		deviceClassName != "" && slices.Contains(strings.Split(f.DeviceClassNames, ","), deviceClassName)
}

func (f DeviceFilter) String() string {
	var parts []string
	if f.ResourceNames != "" {
		parts = append(parts, "resources "+f.ResourceNames)
	}
	if f.DeviceClassNames != "" {
		parts = append(parts, "device classes "+f.DeviceClassNames)
	}
	if len(parts) == 0 {
		return "every device"
	}
	return strings.Join(parts, " and ")
}

func joinSorted(names []string) string {
	names = slices.Clone(names)
	slices.Sort(names)
	return strings.Join(slices.Compact(names), ",")
}

// Automatic reports whether the engine chooses the node.
func (p Placement) Automatic() bool { return p.Mode != "" && p.Mode != numav1.PlacementModeStatic }

// WantsPolicy says whether the container gets a memory policy on its home at creation on
// a host whose kernel can (prctl) or cannot set a preferred node: AtCreation everywhere,
// Never nowhere, Auto (or none said) where the prctl is not.
func (d Desire) WantsPolicy(prctl bool) bool {
	switch d.MemoryPolicy {
	case numav1.MemoryPolicyAtCreation:
		return true
	case numav1.MemoryPolicyNever:
		return false
	}
	return !prctl
}

// WantsMigration says whether the container's pages are moved to its home.
func (d Desire) WantsMigration() bool {
	return d.PageMigration == numav1.PageMigrationOnce || d.PageMigration == numav1.PageMigrationFollowHome
}

// Key identifies the container on this host across passes and restarts.
func (d Desire) Key() ContainerKey { return ContainerKey{PodUID: d.PodUID, Container: d.Container} }

// ContainerKey names a container of a pod.
type ContainerKey struct {
	PodUID    types.UID `json:"podUID"`
	Container string    `json:"container"`
}

func (k ContainerKey) String() string { return string(k.PodUID) + "/" + k.Container }

// Conflict records that a NumaPreference selected a container but another source won.
type Conflict struct {
	Preference string // the loser
	Container  string
	Reason     string // OverriddenByAnnotation or OverriddenByPreference
	Winner     string // the winning NumaPreference, or the annotation key
}

// PodPlan is the desired state of one pod.
type PodPlan struct {
	Namespace string
	Desires   []Desire
	Conflicts []Conflict
	// Selected lists every NumaPreference whose selector matches the pod, winners and losers.
	Selected []string
}

// PlanPod decides, for every container of pod, which NUMA node it should prefer and why.
// Precedence, per container: the container's own annotation, then the pod's annotation
// (app containers only), then the oldest matching NumaPreference that covers the container
// (ties broken by name). prefs must be the NumaPreferences of the pod's namespace.
func PlanPod(node cgroups.Node, pod *corev1.Pod, prefs []numav1.NumaPreference) PodPlan {
	plan := PodPlan{Namespace: pod.Namespace}
	matching := matchingPreferences(pod, prefs)
	for _, p := range matching {
		plan.Selected = append(plan.Selected, p.Name)
	}
	statuses := ContainerStatuses(pod)
	for _, c := range PodContainers(pod) {
		d, conflicts, ok := desireOf(node, pod, c, matching)
		if !ok {
			continue // nothing asks for this container
		}
		plan.Conflicts = append(plan.Conflicts, conflicts...)
		if d.Refusal == "" {
			d.Ref, d.Refusal, d.Message = runningRef(node, pod, statuses[c.Name])
		}
		plan.Desires = append(plan.Desires, d)
	}
	return plan
}

// desireOf decides container c's desire, not yet located, from its annotations and the
// NumaPreferences matching its pod, and the preferences it overrides; ok is false when
// nothing asks for it.
func desireOf(node cgroups.Node, pod *corev1.Pod, c PodContainer, matching []*numav1.NumaPreference) (d Desire, conflicts []Conflict, ok bool) {
	d = Desire{
		Pod:       types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name},
		PodUID:    types.UID(node.PodUID(pod)),
		Container: c.Name,
	}
	candidates := coveringPreferences(matching, c)
	source, value, err, annotated := annotationFor(pod, c)
	switch {
	case err != nil:
		d.Refusal, d.Message = numav1.ReasonInvalidAnnotation, err.Error()
	case annotated:
		d.Node, d.Placement = value.node, Placement{Mode: value.mode}
		if d.MemoryPolicy, d.PageMigration, err = mechanismAnnotations(pod); err != nil {
			d.Refusal, d.Message = numav1.ReasonInvalidAnnotation, err.Error()
		}
		if value.mode == numav1.PlacementModeFollowDevices {
			if d.Placement.Devices, err = deviceFilterAnnotations(pod); err != nil {
				d.Refusal, d.Message = numav1.ReasonInvalidAnnotation, err.Error()
			}
		}
		if value.mode != numav1.PlacementModeStatic {
			d.Placement.Group = "annotation " + pod.Namespace + "/" + string(value.mode)
			d.Placement.Weight = podWeight(pod)
		}
		for _, p := range candidates {
			conflicts = append(conflicts, Conflict{Preference: p.Name, Container: c.Name,
				Reason: numav1.ReasonOverriddenByAnnotation, Winner: source})
		}
	case len(candidates) > 0:
		winner := candidates[0]
		d.Node, d.Placement, d.Preference = preferenceNode(winner), preferencePlacement(winner, pod), winner.Name
		d.MemoryPolicy, d.PageMigration = winner.Spec.MemoryPolicy, winner.Spec.PageMigration
		for _, p := range candidates[1:] {
			conflicts = append(conflicts, Conflict{Preference: p.Name, Container: c.Name,
				Reason: numav1.ReasonOverriddenByPreference, Winner: winner.Name})
		}
	default:
		return Desire{}, nil, false
	}
	return d, conflicts, true
}

// PodContainer is one container of a pod's spec: its name, and whether it is an init
// container.
type PodContainer struct {
	Name string
	Init bool
}

// PodContainers lists the containers of pod's spec, init containers first.
func PodContainers(pod *corev1.Pod) []PodContainer {
	var cs []PodContainer
	for _, c := range pod.Spec.InitContainers {
		cs = append(cs, PodContainer{Name: c.Name, Init: true})
	}
	for _, c := range pod.Spec.Containers {
		cs = append(cs, PodContainer{Name: c.Name})
	}
	return cs
}

// matchingPreferences returns the live NumaPreferences whose selector matches pod, oldest
// first, then by name: the order that decides a conflict.
func matchingPreferences(pod *corev1.Pod, prefs []numav1.NumaPreference) []*numav1.NumaPreference {
	var out []*numav1.NumaPreference
	for i := range prefs {
		p := &prefs[i]
		if p.Namespace != pod.Namespace || p.DeletionTimestamp != nil || !placeable(p) {
			continue // the apiserver refuses a Static preference without a node; never guess one
		}
		sel, err := metav1.LabelSelectorAsSelector(labelSelector(p.Spec.Selector))
		if err != nil || sel.Empty() || !sel.Matches(labels.Set(pod.Labels)) {
			continue // the apiserver refuses empty and malformed selectors; never widen them here
		}
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b *numav1.NumaPreference) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out
}

// labelSelector is s as the apimachinery type that parses it.
func labelSelector(s numav1.LabelSelector) *metav1.LabelSelector {
	out := &metav1.LabelSelector{MatchLabels: s.MatchLabels}
	for _, e := range s.MatchExpressions {
		out.MatchExpressions = append(out.MatchExpressions, metav1.LabelSelectorRequirement(e))
	}
	return out
}

func coveringPreferences(matching []*numav1.NumaPreference, c PodContainer) []*numav1.NumaPreference {
	var out []*numav1.NumaPreference
	for _, p := range matching {
		if len(p.Spec.Containers) == 0 && !c.Init || slices.Contains(p.Spec.Containers, c.Name) {
			out = append(out, p)
		}
	}
	return out
}

// annotationValue is what a preferred-node annotation asks for: a node (Static) or a mode.
type annotationValue struct {
	node int
	mode numav1.PlacementMode
}

// annotationFor returns the annotation that sets c's node, if any: the per-container key,
// else (for app containers) the pod-wide key.
func annotationFor(pod *corev1.Pod, c PodContainer) (key string, value annotationValue, err error, ok bool) {
	key = numav1.AnnotationPreferredNodePrefix + c.Name
	v, ok := pod.Annotations[key]
	if !ok && !c.Init {
		key = numav1.AnnotationPreferredNode
		v, ok = pod.Annotations[key]
	}
	if !ok {
		return "", annotationValue{}, nil, false
	}
	if mode := numav1.PlacementMode(v); mode != numav1.PlacementModeStatic && slices.Contains(automaticModes, mode) {
		return key, annotationValue{node: numa.NoNode, mode: mode}, nil, true
	}
	node, err := ParseNodeAnnotation(v)
	if err != nil {
		return key, annotationValue{}, fmt.Errorf("annotation %s: %w", key, err), true
	}
	return key, annotationValue{node: node, mode: numav1.PlacementModeStatic}, nil, true
}

// mechanismAnnotations are the pod's numapref.io/memory-policy and
// numapref.io/page-migration annotations: "" (Auto, Never) for one it has not, an error for
// a value that is not one of the field's.
func mechanismAnnotations(pod *corev1.Pod) (numav1.MemoryPolicy, numav1.PageMigration, error) {
	policy, err := enumAnnotation(pod, numav1.AnnotationMemoryPolicy,
		numav1.MemoryPolicyAuto, numav1.MemoryPolicyAtCreation, numav1.MemoryPolicyNever)
	if err != nil {
		return "", "", err
	}
	migration, err := enumAnnotation(pod, numav1.AnnotationPageMigration,
		numav1.PageMigrationNever, numav1.PageMigrationOnce, numav1.PageMigrationFollowHome)
	return policy, migration, err
}

// enumAnnotation is the pod's annotation key: "" when it has none, an error for a value
// that is not one of values.
func enumAnnotation[T ~string](pod *corev1.Pod, key string, values ...T) (T, error) {
	v, ok := pod.Annotations[key]
	if !ok {
		return "", nil
	}
	if slices.Contains(values, T(v)) {
		return T(v), nil
	}
	names := make([]string, len(values))
	for i, n := range values {
		names[i] = string(n)
	}
	return "", fmt.Errorf("annotation %s: %s is not one of %s", key, quoteBounded(v), strings.Join(names, ", "))
}

// automaticModes are the modes an annotation may name instead of a node id.
var automaticModes = []numav1.PlacementMode{numav1.PlacementModeSpread, numav1.PlacementModeFollowCPUs,
	numav1.PlacementModeMostFreeMemory, numav1.PlacementModeFollowDevices}

// ParseNodeAnnotation parses a preferred-node annotation value that is a node id: canonical
// decimal ("0", "17"; not "-0", "01", "+1", " 1" or "1e3"), 0 to MaxNUMANodeID.
func ParseNodeAnnotation(v string) (int, error) {
	canonical := v != "" && len(v) <= 4 && (v == "0" || v[0] != '0') &&
		strings.Trim(v, "0123456789") == ""
	n, err := strconv.Atoi(v)
	if !canonical || err != nil {
		return 0, fmt.Errorf("%s is not a NUMA node id (want a decimal integer 0-%d without sign or leading zeros) nor a mode (%s)",
			quoteBounded(v), numav1.MaxNUMANodeID, modeNames())
	}
	if n > numav1.MaxNUMANodeID {
		return 0, fmt.Errorf("NUMA node %d is out of range 0-%d", n, numav1.MaxNUMANodeID)
	}
	return n, nil
}

// quotedMax bounds how much of an annotation's value a message quotes: the value can be
// as large as the pod's annotations (256 KiB), and the message reaches the container's
// status, an Event and inspect.
const quotedMax = 64

// quoteBounded quotes v, or its first quotedMax bytes (cut at a character's start) and
// how long it is.
func quoteBounded(v string) string {
	if len(v) <= quotedMax {
		return strconv.Quote(v)
	}
	cut := quotedMax
	for cut > 0 && !utf8.RuneStart(v[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… (%d bytes)", strconv.Quote(v[:cut]), len(v))
}

func modeNames() string {
	names := make([]string, len(automaticModes))
	for i, m := range automaticModes {
		names[i] = string(m)
	}
	return strings.Join(names, ", ")
}

// placeable reports whether a NumaPreference names enough to place a pod.
func placeable(p *numav1.NumaPreference) bool {
	return p.Spec.Node != nil || (p.Spec.Mode != "" && p.Spec.Mode != numav1.PlacementModeStatic)
}

func preferenceNode(p *numav1.NumaPreference) int {
	if p.Spec.Node == nil {
		return numa.NoNode
	}
	return int(*p.Spec.Node)
}

// preferencePlacement is how preference p places pod.
func preferencePlacement(p *numav1.NumaPreference, pod *corev1.Pod) Placement {
	mode := p.Spec.Mode
	if mode == "" {
		mode = numav1.PlacementModeStatic
	}
	pl := Placement{Mode: mode}
	if pl.Automatic() {
		allowed := make([]int, len(p.Spec.Nodes))
		for i, n := range p.Spec.Nodes {
			allowed[i] = int(n)
		}
		slices.Sort(allowed)
		pl.Allowed = numa.FormatList(slices.Compact(allowed))
		pl.Group = "NumaPreference " + p.Namespace + "/" + p.Name
		pl.Weight = podWeight(pod)
	}
	if d := p.Spec.Devices; mode == numav1.PlacementModeFollowDevices && d != nil {
		pl.Devices = NewDeviceFilter(d.ResourceNames, d.DeviceClassNames)
	}
	return pl
}

// podWeight is the pod's app containers' CPU requests in millicores, or 1000 (one CPU) when
// it requests none: a pod without requests may use a whole CPU as much as a small one does.
func podWeight(pod *corev1.Pod) int64 {
	var m int64
	for _, c := range pod.Spec.Containers {
		if q, ok := c.Resources.Requests[corev1.ResourceCPU]; ok {
			m += q.MilliValue()
		}
	}
	if m <= 0 {
		return 1000
	}
	return m
}

// ContainerStatuses maps the names of pod's containers, init ones too, to their statuses.
func ContainerStatuses(pod *corev1.Pod) map[string]corev1.ContainerStatus {
	m := make(map[string]corev1.ContainerStatus, len(pod.Status.ContainerStatuses)+len(pod.Status.InitContainerStatuses))
	for _, s := range pod.Status.InitContainerStatuses {
		m[s.Name] = s
	}
	for _, s := range pod.Status.ContainerStatuses {
		m[s.Name] = s
	}
	return m
}

// runningRef locates a running container; a container that is not running yet (or any
// more) is skipped, not an error.
func runningRef(node cgroups.Node, pod *corev1.Pod, s corev1.ContainerStatus) (cgroups.ContainerRef, string, string) {
	if s.ContainerID == "" || s.State.Running == nil {
		return cgroups.ContainerRef{}, numav1.ReasonContainerNotRunning, "container is not running"
	}
	return cgroups.ContainerRef{PodUID: node.PodUID(pod), QOS: pod.Status.QOSClass, ContainerID: s.ContainerID}, "", ""
}
