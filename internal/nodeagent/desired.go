package nodeagent

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/internal/nodeagent/cgroups"
)

// Desire is what one container of a pod should get on this host.
type Desire struct {
	Pod       types.NamespacedName
	PodUID    types.UID
	Container string
	// Ref locates the container's cgroup; Ref.ContainerID is empty while it is not running.
	Ref cgroups.ContainerRef
	// Node is the preferred NUMA node.
	Node int
	// Preference names the NumaPreference the node comes from; empty for an annotation.
	Preference string
	// Skip is a reason not to act at all (InvalidAnnotation, ContainerNotRunning); empty to act.
	Skip    string
	Message string
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
func PlanPod(pod *corev1.Pod, prefs []numav1.NumaPreference) PodPlan {
	plan := PodPlan{Namespace: pod.Namespace}
	matching := matchingPreferences(pod, prefs)
	for _, p := range matching {
		plan.Selected = append(plan.Selected, p.Name)
	}
	statuses := containerStatuses(pod)
	for _, c := range podContainers(pod) {
		d := Desire{
			Pod:       types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name},
			PodUID:    pod.UID,
			Container: c.name,
		}
		candidates := coveringPreferences(matching, c)
		source, node, err, ok := annotationFor(pod, c)
		switch {
		case err != nil:
			d.Skip, d.Message = numav1.ReasonInvalidAnnotation, err.Error()
		case ok:
			d.Node = node
			for _, p := range candidates {
				plan.Conflicts = append(plan.Conflicts, Conflict{Preference: p.Name, Container: c.name,
					Reason: numav1.ReasonOverriddenByAnnotation, Winner: source})
			}
		case len(candidates) > 0:
			winner := candidates[0]
			d.Node, d.Preference = int(*winner.Spec.Node), winner.Name
			for _, p := range candidates[1:] {
				plan.Conflicts = append(plan.Conflicts, Conflict{Preference: p.Name, Container: c.name,
					Reason: numav1.ReasonOverriddenByPreference, Winner: winner.Name})
			}
		default:
			continue // nothing asks for this container
		}
		if d.Skip == "" {
			d.Ref, d.Skip, d.Message = runningRef(pod, statuses[c.name])
		}
		plan.Desires = append(plan.Desires, d)
	}
	return plan
}

type podContainer struct {
	name string
	init bool
}

func podContainers(pod *corev1.Pod) []podContainer {
	var cs []podContainer
	for _, c := range pod.Spec.InitContainers {
		cs = append(cs, podContainer{name: c.Name, init: true})
	}
	for _, c := range pod.Spec.Containers {
		cs = append(cs, podContainer{name: c.Name})
	}
	return cs
}

// matchingPreferences returns the live NumaPreferences whose selector matches pod, oldest
// first, then by name: the order that decides a conflict.
func matchingPreferences(pod *corev1.Pod, prefs []numav1.NumaPreference) []*numav1.NumaPreference {
	var out []*numav1.NumaPreference
	for i := range prefs {
		p := &prefs[i]
		if p.Namespace != pod.Namespace || p.DeletionTimestamp != nil || p.Spec.Node == nil {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(&p.Spec.Selector)
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

func coveringPreferences(matching []*numav1.NumaPreference, c podContainer) []*numav1.NumaPreference {
	var out []*numav1.NumaPreference
	for _, p := range matching {
		if len(p.Spec.Containers) == 0 && !c.init || slices.Contains(p.Spec.Containers, c.name) {
			out = append(out, p)
		}
	}
	return out
}

// annotationFor returns the annotation that sets c's node, if any: the per-container key,
// else (for app containers) the pod-wide key.
func annotationFor(pod *corev1.Pod, c podContainer) (key string, node int, err error, ok bool) {
	key = numav1.AnnotationPreferredNodePrefix + c.name
	v, ok := pod.Annotations[key]
	if !ok && !c.init {
		key = numav1.AnnotationPreferredNode
		v, ok = pod.Annotations[key]
	}
	if !ok {
		return "", 0, nil, false
	}
	node, err = ParseNodeAnnotation(v)
	if err != nil {
		return key, 0, fmt.Errorf("annotation %s: %w", key, err), true
	}
	return key, node, nil, true
}

// ParseNodeAnnotation parses a preferred-node annotation value: a decimal NUMA node id.
func ParseNodeAnnotation(v string) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil || strings.TrimSpace(v) != v || strings.HasPrefix(v, "+") {
		return 0, fmt.Errorf("%q is not a NUMA node id (want an integer 0-%d)", v, numav1.MaxNUMANodeID)
	}
	if n < 0 || n > numav1.MaxNUMANodeID {
		return 0, fmt.Errorf("NUMA node %d is out of range 0-%d", n, numav1.MaxNUMANodeID)
	}
	return n, nil
}

func containerStatuses(pod *corev1.Pod) map[string]corev1.ContainerStatus {
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
func runningRef(pod *corev1.Pod, s corev1.ContainerStatus) (cgroups.ContainerRef, string, string) {
	if s.ContainerID == "" || s.State.Running == nil {
		return cgroups.ContainerRef{}, numav1.ReasonContainerNotRunning, "container is not running"
	}
	return cgroups.ContainerRef{PodUID: cgroups.PodUID(pod), QOS: pod.Status.QOSClass, ContainerID: s.ContainerID}, "", ""
}
