// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package desire

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/internal/nodeagent/cgroups"
	"github.com/numapref/numapref/internal/testutil/builders"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// pref is NumaPreference ns/name, created age before t0, for node, selecting sel.
func pref(name string, age time.Duration, node int32, sel map[string]string, containers ...string) numav1.NumaPreference {
	return *builders.MakePreference("ns", name).CreatedAt(metav1.NewTime(t0.Add(-age))).Node(node).
		SelectorLabels(sel).Containers(containers...).Obj()
}

func testPod(labels, annotations map[string]string) *corev1.Pod {
	running := corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "uid-1", Labels: labels, Annotations: annotations},
		Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{Name: "init"}},
			Containers:     []corev1.Container{{Name: "app"}, {Name: "side"}},
		},
		Status: corev1.PodStatus{
			QOSClass: corev1.PodQOSBurstable,
			InitContainerStatuses: []corev1.ContainerStatus{
				{Name: "init", ContainerID: "containerd://i", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{}}},
			},
			ContainerStatuses: []corev1.ContainerStatus{
				{Name: "app", ContainerID: "containerd://a", State: running},
				{Name: "side", ContainerID: "", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{}}},
			},
		},
	}
}

// summary is a compact view of a plan for comparison.
type summary struct {
	Container, Preference, Skip string
	Node                        int
}

func summarizePlan(p PodPlan) ([]summary, []Conflict, []string) {
	var s []summary
	for _, d := range p.Desires {
		s = append(s, summary{Container: d.Container, Preference: d.Preference, Skip: d.Refusal, Node: d.Node})
	}
	return s, p.Conflicts, p.Selected
}

func TestPlanPod(t *testing.T) {
	sel := map[string]string{"app": "db"}
	tests := map[string]struct {
		labels, annotations map[string]string
		prefs               []numav1.NumaPreference
		want                []summary
		wantConflicts       []Conflict
		wantSelected        []string
	}{
		"nothing selects the pod": {
			labels: map[string]string{"app": "web"},
			prefs:  []numav1.NumaPreference{pref("a", time.Hour, 1, sel)},
		},
		"one preference covers app containers, not init ones": {
			labels: sel,
			prefs:  []numav1.NumaPreference{pref("a", time.Hour, 1, sel)},
			want: []summary{
				{Container: "app", Preference: "a", Node: 1},
				{Container: "side", Preference: "a", Node: 1, Skip: numav1.ReasonContainerNotRunning},
			},
			wantSelected: []string{"a"},
		},
		"a named init container is covered": {
			labels: sel,
			prefs:  []numav1.NumaPreference{pref("a", time.Hour, 1, sel, "init")},
			want: []summary{
				{Container: "init", Preference: "a", Node: 1, Skip: numav1.ReasonContainerNotRunning},
			},
			wantSelected: []string{"a"},
		},
		"the oldest preference wins, the newer one is told": {
			labels:        sel,
			prefs:         []numav1.NumaPreference{pref("young", time.Minute, 0, sel, "app"), pref("old", time.Hour, 1, sel, "app")},
			want:          []summary{{Container: "app", Preference: "old", Node: 1}},
			wantConflicts: []Conflict{{Preference: "young", Container: "app", Reason: numav1.ReasonOverriddenByPreference, Winner: "old"}},
			wantSelected:  []string{"old", "young"},
		},
		"same age: the name decides": {
			labels:        sel,
			prefs:         []numav1.NumaPreference{pref("b", time.Hour, 0, sel, "app"), pref("a", time.Hour, 1, sel, "app")},
			want:          []summary{{Container: "app", Preference: "a", Node: 1}},
			wantConflicts: []Conflict{{Preference: "b", Container: "app", Reason: numav1.ReasonOverriddenByPreference, Winner: "a"}},
			wantSelected:  []string{"a", "b"},
		},
		"per-container winners": {
			labels: sel,
			prefs:  []numav1.NumaPreference{pref("old", time.Hour, 1, sel, "side"), pref("all", time.Minute, 0, sel)},
			want: []summary{
				{Container: "app", Preference: "all", Node: 0},
				{Container: "side", Preference: "old", Node: 1, Skip: numav1.ReasonContainerNotRunning},
			},
			wantConflicts: []Conflict{{Preference: "all", Container: "side", Reason: numav1.ReasonOverriddenByPreference, Winner: "old"}},
			wantSelected:  []string{"old", "all"},
		},
		"the pod annotation wins over a preference": {
			labels:      sel,
			annotations: map[string]string{numav1.AnnotationPreferredNode: "3"},
			prefs:       []numav1.NumaPreference{pref("a", time.Hour, 1, sel, "app")},
			want: []summary{
				{Container: "app", Node: 3},
				{Container: "side", Node: 3, Skip: numav1.ReasonContainerNotRunning},
			},
			wantConflicts: []Conflict{{Preference: "a", Container: "app", Reason: numav1.ReasonOverriddenByAnnotation, Winner: numav1.AnnotationPreferredNode}},
			wantSelected:  []string{"a"},
		},
		"a container annotation wins over the pod annotation and reaches init containers": {
			annotations: map[string]string{numav1.AnnotationPreferredNode: "3", numav1.AnnotationPreferredNodePrefix + "app": "2", numav1.AnnotationPreferredNodePrefix + "init": "0"},
			want: []summary{
				{Container: "init", Node: 0, Skip: numav1.ReasonContainerNotRunning},
				{Container: "app", Node: 2},
				{Container: "side", Node: 3, Skip: numav1.ReasonContainerNotRunning},
			},
		},
		"an invalid annotation skips the container, never falls back": {
			labels:      sel,
			annotations: map[string]string{numav1.AnnotationPreferredNode: "-1"},
			prefs:       []numav1.NumaPreference{pref("a", time.Hour, 1, sel, "app")},
			want: []summary{
				{Container: "app", Skip: numav1.ReasonInvalidAnnotation},
				{Container: "side", Skip: numav1.ReasonInvalidAnnotation},
			},
			wantSelected: []string{"a"},
		},
		"a preference being deleted selects nothing": {
			labels: sel,
			prefs: func() []numav1.NumaPreference {
				p := pref("a", time.Hour, 1, sel)
				p.DeletionTimestamp = ptr.To(metav1.NewTime(t0))
				return []numav1.NumaPreference{p}
			}(),
		},
		"an empty selector never selects (the apiserver refuses it anyway)": {
			labels: sel,
			prefs:  []numav1.NumaPreference{pref("a", time.Hour, 1, nil)},
		},
		"another namespace never selects": {
			labels: sel,
			prefs: func() []numav1.NumaPreference {
				p := pref("a", time.Hour, 1, sel)
				p.Namespace = "other"
				return []numav1.NumaPreference{p}
			}(),
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, conflicts, selected := summarizePlan(PlanPod(testNode, testPod(tc.labels, tc.annotations), tc.prefs))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("desires (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantConflicts, conflicts); diff != "" {
				t.Errorf("conflicts (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantSelected, selected); diff != "" {
				t.Errorf("selected (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPlanPodLocatesRunningContainers(t *testing.T) {
	p := PlanPod(testNode, testPod(nil, map[string]string{numav1.AnnotationPreferredNode: "0"}), nil)
	want := Desire{
		Pod: types.NamespacedName{Namespace: "ns", Name: "p"}, PodUID: "uid-1", Container: "app",
		Ref:       cgroups.ContainerRef{PodUID: "uid-1", QOS: corev1.PodQOSBurstable, ContainerID: "containerd://a"},
		Placement: Placement{Mode: numav1.PlacementModeStatic},
	}
	if diff := cmp.Diff(want, p.Desires[0]); diff != "" {
		t.Errorf("desire (-want +got):\n%s", diff)
	}
}

// TestPlanPodMirrorAnnotation: the mirror-pod annotation names a static pod's cgroup, and
// its container's key, only on a pod that its node's kubelet made; on any other pod the
// pod's own cgroup is acted on.
func TestPlanPodMirrorAnnotation(t *testing.T) {
	const staticUID = "0a1b2c3d4e5f60718293a4b5c6d7e8f9" // of a static pod, etcd's say
	kubelet := metav1.OwnerReference{APIVersion: "v1", Kind: "Node", Name: "node-a", UID: "node-uid", Controller: ptr.To(true)}
	tests := map[string]struct {
		owners []metav1.OwnerReference
		want   string
	}{
		"made by the node's kubelet": {owners: []metav1.OwnerReference{kubelet}, want: staticUID},
		"made by a user":             {want: "uid-1"},
		"claiming another node":      {owners: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: "node-b", UID: "b", Controller: ptr.To(true)}}, want: "uid-1"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			pod := testPod(nil, map[string]string{numav1.AnnotationPreferredNode: "0", "kubernetes.io/config.mirror": staticUID})
			pod.Spec.NodeName, pod.OwnerReferences = "node-a", tc.owners
			p := PlanPod(testNode, pod, nil)
			if diff := cmp.Diff(tc.want, p.Desires[0].Ref.PodUID); diff != "" {
				t.Errorf("cgroup's pod UID (-want +got):\n%s", diff)
			}
			// The container's key is the same UID: the runtime's sandbox, at the container's
			// start, names it so (PlaceAtStart).
			if got := p.Desires[0].Key().PodUID; string(got) != tc.want {
				t.Errorf("key's pod UID %q, want %q", got, tc.want)
			}
		})
	}
}

func TestParseNodeAnnotation(t *testing.T) {
	tests := map[string]struct {
		in      string
		want    int
		wantErr bool
	}{
		"zero":      {in: "0", want: 0},
		"max":       {in: "1023", want: 1023},
		"too big":   {in: "1024", wantErr: true},
		"negative":  {in: "-1", wantErr: true},
		"plus sign": {in: "+1", wantErr: true},
		"padded":    {in: " 1", wantErr: true},
		"empty":     {in: "", wantErr: true},
		"word":      {in: "one", wantErr: true},
		"huge":      {in: "99999999999999999999", wantErr: true},
		// Canonical decimal only: one value, one spelling.
		"minus zero":     {in: "-0", wantErr: true},
		"leading zero":   {in: "01", wantErr: true},
		"leading zeros":  {in: "007", wantErr: true},
		"exponent":       {in: "1e3", wantErr: true},
		"hex":            {in: "0x1", wantErr: true},
		"trailing space": {in: "1 ", wantErr: true},
		"mode name":      {in: "Spread", wantErr: true}, // a mode, not a node id: annotationFor takes it
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseNodeAnnotation(tc.in)
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Errorf("ParseNodeAnnotation(%q) = %d, %v; want %d, error %v", tc.in, got, err, tc.want, tc.wantErr)
			}
		})
	}
}

// A value as large as the pod's annotations may be (256 KiB) is not echoed whole: the
// message reaches the container's status, an Event and inspect. Its start and its length
// are, and a cut never splits a character.
func TestParseNodeAnnotationQuotesLittle(t *testing.T) {
	for name, v := range map[string]string{
		"ascii":     strings.Repeat("x", 256<<10),
		"multibyte": strings.Repeat("é", 128<<10),
		"short":     "not-a-node",
	} {
		_, err := ParseNodeAnnotation(v)
		if err == nil {
			t.Fatalf("%s: accepted", name)
		}
		msg := err.Error()
		if len(msg) > 400 {
			t.Errorf("%s: the message is %d bytes, want at most 400: %.120s…", name, len(msg), msg)
		}
		if !utf8.ValidString(msg) {
			t.Errorf("%s: the message is not valid UTF-8", name)
		}
		if len(v) > quotedMax && !strings.Contains(msg, fmt.Sprintf("(%d bytes)", len(v))) {
			t.Errorf("%s: the message does not say how long the value is: %s", name, msg)
		}
		if len(v) <= quotedMax && !strings.Contains(msg, strconv.Quote(v)) {
			t.Errorf("%s: a short value is not quoted whole: %s", name, msg)
		}
	}
}

func FuzzParseNodeAnnotation(f *testing.F) {
	for _, s := range []string{"0", "1023", "-1", "+1", " 1", "1e3", "0x1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseNodeAnnotation(s)
		if err != nil {
			return
		}
		if n < 0 || n > numav1.MaxNUMANodeID {
			t.Fatalf("ParseNodeAnnotation(%q) accepted out-of-range %d", s, n)
		}
		// Canonical: the accepted text is exactly how the id prints, so no two spellings
		// of one node are both accepted.
		if back := strconv.Itoa(n); back != s {
			t.Fatalf("ParseNodeAnnotation(%q) = %d, which prints as %q: not canonical", s, n, back)
		}
	})
}

func TestPlanPodPlacement(t *testing.T) {
	sel := map[string]string{"app": "db"}
	spread := pref("s", time.Hour, 0, sel)
	spread.Spec.Node, spread.Spec.Mode, spread.Spec.Nodes = nil, numav1.PlacementModeSpread, []int32{3, 1, 2}
	gpus := pref("g", time.Hour, 0, sel)
	gpus.Spec.Node, gpus.Spec.Mode = nil, numav1.PlacementModeFollowDevices
	gpus.Spec.Devices = &numav1.DeviceSelection{ResourceNames: []string{"example.com/gpu", "example.com/fpga"}, DeviceClassNames: []string{"nic.example.com"}}
	pod := func(annotations map[string]string, cpu string) *corev1.Pod {
		p := testPod(sel, annotations)
		if cpu != "" {
			p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}
		}
		return p
	}
	tests := map[string]struct {
		pod   *corev1.Pod
		prefs []numav1.NumaPreference
		want  Placement
		node  int
	}{
		"Static from a preference": {pod: pod(nil, ""), prefs: []numav1.NumaPreference{pref("a", time.Hour, 1, sel)},
			want: Placement{Mode: numav1.PlacementModeStatic}, node: 1},
		"Spread from a preference, weighed by CPU requests": {pod: pod(nil, "1500m"), prefs: []numav1.NumaPreference{spread},
			want: Placement{Mode: numav1.PlacementModeSpread, Allowed: "1-3", Group: "NumaPreference ns/s", Weight: 1500}, node: -1},
		"no requests weigh one CPU": {pod: pod(nil, ""), prefs: []numav1.NumaPreference{spread},
			want: Placement{Mode: numav1.PlacementModeSpread, Allowed: "1-3", Group: "NumaPreference ns/s", Weight: 1000}, node: -1},
		"a mode by annotation groups the namespace's pods of that value": {
			pod:  pod(map[string]string{numav1.AnnotationPreferredNode: "Spread"}, ""),
			want: Placement{Mode: numav1.PlacementModeSpread, Group: "annotation ns/Spread", Weight: 1000}, node: -1},
		"FollowCPUs by annotation": {pod: pod(map[string]string{numav1.AnnotationPreferredNode: "FollowCPUs"}, ""),
			want: Placement{Mode: numav1.PlacementModeFollowCPUs, Group: "annotation ns/FollowCPUs", Weight: 1000}, node: -1},
		"FollowDevices from a preference, narrowed by spec.devices": {pod: pod(nil, ""), prefs: []numav1.NumaPreference{gpus},
			want: Placement{Mode: numav1.PlacementModeFollowDevices, Group: "NumaPreference ns/g", Weight: 1000,
				Devices: DeviceFilter{ResourceNames: "example.com/fpga,example.com/gpu", DeviceClassNames: "nic.example.com"}}, node: -1},
		"FollowDevices by annotation, every device": {pod: pod(map[string]string{numav1.AnnotationPreferredNode: "FollowDevices"}, ""),
			want: Placement{Mode: numav1.PlacementModeFollowDevices, Group: "annotation ns/FollowDevices", Weight: 1000}, node: -1},
		"FollowDevices by annotation, narrowed": {pod: pod(map[string]string{numav1.AnnotationPreferredNode: "FollowDevices",
			numav1.AnnotationFollowResourceNames: "example.com/gpu, example.com/gpu", numav1.AnnotationFollowDeviceClassNames: "nic.example.com"}, ""),
			want: Placement{Mode: numav1.PlacementModeFollowDevices, Group: "annotation ns/FollowDevices", Weight: 1000,
				Devices: DeviceFilter{ResourceNames: "example.com/gpu", DeviceClassNames: "nic.example.com"}}, node: -1},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p := PlanPod(testNode, tc.pod, tc.prefs)
			if len(p.Desires) == 0 {
				t.Fatal("no desire")
			}
			d := p.Desires[0]
			if diff := cmp.Diff(tc.want, d.Placement); diff != "" || d.Node != tc.node {
				t.Errorf("placement (-want +got):\n%s; node %d, want %d", diff, d.Node, tc.node)
			}
		})
	}
	// A mode name in the wrong case is no mode, and no node id: the container is skipped.
	p := PlanPod(testNode, pod(map[string]string{numav1.AnnotationPreferredNode: "spread"}, ""), nil)
	if d := p.Desires[0]; d.Refusal != numav1.ReasonInvalidAnnotation || !strings.Contains(d.Message, "Spread, FollowCPUs, MostFreeMemory") {
		t.Errorf("annotation \"spread\": %s %q, want InvalidAnnotation naming the modes", d.Refusal, d.Message)
	}
	// The follow annotations are checked as spec.devices is.
	for _, bad := range []map[string]string{
		{numav1.AnnotationFollowResourceNames: "gpu"},                             // no domain
		{numav1.AnnotationFollowResourceNames: "example.com/gpu,"},                // an empty name
		{numav1.AnnotationFollowDeviceClassNames: "Nic.Example.com"},              // not a DNS subdomain
		{numav1.AnnotationFollowDeviceClassNames: strings.Repeat("a,", 16) + "a"}, // 17 names
	} {
		bad[numav1.AnnotationPreferredNode] = "FollowDevices"
		p := PlanPod(testNode, pod(bad, ""), nil)
		if d := p.Desires[0]; d.Refusal != numav1.ReasonInvalidAnnotation {
			t.Errorf("annotations %v: %s %q, want InvalidAnnotation", bad, d.Refusal, d.Message)
		}
	}
}

// A device filter follows what either list names, and everything when both are empty.
func TestDeviceFilter(t *testing.T) {
	f := NewDeviceFilter([]string{"example.com/gpu"}, []string{"nic.example.com"})
	for _, tc := range []struct {
		resource, class string
		want            bool
	}{
		{"example.com/gpu", "", true}, {"", "nic.example.com", true}, {"example.com/fpga", "", false},
		{"", "gpu.example.com", false}, {"", "", false}, {"example.com", "", false},
	} {
		if got := f.Follows(tc.resource, tc.class); got != tc.want {
			t.Errorf("Follows(%q, %q) = %v, want %v", tc.resource, tc.class, got, tc.want)
		}
	}
	if !(DeviceFilter{}).Follows("example.com/anything", "") || !(DeviceFilter{}).Follows("", "any.class") {
		t.Error("the zero filter does not follow every device")
	}
}

// testNode is the node the tests' pods run on, as the reconciler knows it (its UID read).
var testNode = cgroups.Node{Name: "node-a", UID: "node-uid"}

// The desire says whether pages are moved: the winning preference's spec.pageMigration,
// or for a container the annotations place the pod's numapref.io/page-migration, whose
// bad value refuses the container like a bad node annotation.
func TestPlanPodPageMigration(t *testing.T) {
	sel := map[string]string{"app": "db"}
	follow := *builders.MakePreference("ns", "a").CreatedAt(metav1.NewTime(t0.Add(-time.Hour))).Node(1).
		SelectorLabels(sel).Containers("app").PageMigration(numav1.PageMigrationFollowHome).Obj()
	for name, tc := range map[string]struct {
		annotations map[string]string
		prefs       []numav1.NumaPreference
		want        numav1.PageMigration
		refusal     string
	}{
		"the preference's":     {prefs: []numav1.NumaPreference{follow}, want: numav1.PageMigrationFollowHome},
		"unset is off":         {prefs: []numav1.NumaPreference{pref("a", time.Hour, 1, sel, "app")}, want: ""},
		"the annotation's":     {annotations: map[string]string{numav1.AnnotationPreferredNode: "1", numav1.AnnotationPageMigration: "Once"}, want: numav1.PageMigrationOnce},
		"annotation wins":      {annotations: map[string]string{numav1.AnnotationPreferredNode: "1"}, prefs: []numav1.NumaPreference{follow}, want: ""},
		"a bad annotation":     {annotations: map[string]string{numav1.AnnotationPreferredNode: "1", numav1.AnnotationPageMigration: "always"}, refusal: numav1.ReasonInvalidAnnotation},
		"a bad policy, too":    {annotations: map[string]string{numav1.AnnotationPreferredNode: "1", numav1.AnnotationMemoryPolicy: "Bind"}, refusal: numav1.ReasonInvalidAnnotation},
		"alone it asks naught": {annotations: map[string]string{numav1.AnnotationPageMigration: "Once"}},
	} {
		t.Run(name, func(t *testing.T) {
			p := PlanPod(cgroups.Node{}, testPod(sel, tc.annotations), tc.prefs)
			var app *Desire
			for i := range p.Desires {
				if p.Desires[i].Container == "app" {
					app = &p.Desires[i]
				}
			}
			if name == "alone it asks naught" {
				if app != nil {
					t.Errorf("a page-migration annotation alone selected the container: %+v", app)
				}
				return
			}
			if app == nil {
				t.Fatal("no desire for container app")
			}
			if app.Refusal != tc.refusal || app.PageMigration != tc.want {
				t.Errorf("refusal %q (%s), migration %q; want %q, %q", app.Refusal, app.Message, app.PageMigration, tc.refusal, tc.want)
			}
			if tc.refusal != "" && !strings.Contains(app.Message, "is not one of") {
				t.Errorf("message %q does not list the values", app.Message)
			}
		})
	}
}
