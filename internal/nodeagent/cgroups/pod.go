package cgroups

import corev1 "k8s.io/api/core/v1"

// mirrorPodAnnotation is set by the kubelet on the API server's copy (mirror pod) of a
// static pod. Its value is the static pod's config hash, which is also the UID the kubelet
// runs the pod and names its cgroup with; the mirror pod's own metadata.uid is a different,
// server-made UID.
const mirrorPodAnnotation = "kubernetes.io/config.mirror"

// PodUID returns the UID that names pod's cgroup: the static pod UID for a mirror
// pod, metadata.uid otherwise.
func PodUID(pod *corev1.Pod) string {
	if uid := pod.Annotations[mirrorPodAnnotation]; uid != "" {
		return uid
	}
	return string(pod.UID)
}
