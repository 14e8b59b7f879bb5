package cgroups

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// mirrorPodAnnotation is set by the kubelet on the API server's copy (mirror pod) of a
// static pod. Its value is the static pod's config hash, which is also the UID the kubelet
// runs the pod and names its cgroup with; the mirror pod's own metadata.uid is a different,
// server-made UID.
const mirrorPodAnnotation = "kubernetes.io/config.mirror"

// PodUID returns the UID that names pod's cgroup: the static pod UID for a mirror pod
// (see IsMirrorPod), metadata.uid otherwise.
func PodUID(pod *corev1.Pod) string {
	if uid := pod.Annotations[mirrorPodAnnotation]; uid != "" && IsMirrorPod(pod) {
		return uid
	}
	return string(pod.UID)
}

// IsMirrorPod reports whether pod is a mirror pod that the kubelet of its node made: the
// kubelet sets its Node as the pod's controller (NodeRestriction requires it). The mirror
// annotation alone proves nothing: the apiserver accepts it from anyone who may create a
// pod, who would then choose any static pod's cgroup (etcd's, kube-apiserver's) for the
// agent to act on.
func IsMirrorPod(pod *corev1.Pod) bool {
	owner := metav1.GetControllerOfNoCopy(pod)
	return owner != nil && pod.Spec.NodeName != "" &&
		owner.APIVersion == "v1" && owner.Kind == "Node" && owner.Name == pod.Spec.NodeName
}

// IgnoresMirrorAnnotation reports whether pod carries the mirror annotation without being
// a mirror pod: PodUID then names the pod's own cgroup, by metadata.uid.
func IgnoresMirrorAnnotation(pod *corev1.Pod) bool {
	return pod.Annotations[mirrorPodAnnotation] != "" && !IsMirrorPod(pod)
}
