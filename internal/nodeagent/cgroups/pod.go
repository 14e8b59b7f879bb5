// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package cgroups

import (
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// mirrorPodAnnotation is set by the kubelet on the API server's copy (mirror pod) of a
// static pod. Its value is the static pod's config hash, which is also the UID the kubelet
// runs the pod and names its cgroup with; the mirror pod's own metadata.uid is a different,
// server-made UID.
const mirrorPodAnnotation = "kubernetes.io/config.mirror"

// Node is the agent's node as the API names it. Its kubelet makes each mirror pod
// controlled by the Node, by name and UID.
type Node struct {
	Name string
	UID  types.UID
}

// PodUID returns the UID that names pod's cgroup: the static pod UID for a mirror pod of
// n (see IsMirrorPod), metadata.uid otherwise.
func (n Node) PodUID(pod *corev1.Pod) string {
	if uid := pod.Annotations[mirrorPodAnnotation]; uid != "" && n.IsMirrorPod(pod) {
		return uid
	}
	return string(pod.UID)
}

// IsMirrorPod reports whether pod is a mirror pod that n's kubelet made: the kubelet sets
// its Node as the pod's controller (NodeRestriction requires it). The mirror annotation
// alone proves nothing: the apiserver accepts it from anyone who may create a pod, who
// would then choose any static pod's cgroup (etcd's, kube-apiserver's) for the agent to
// act on. Nor does the Node's name, which anyone who may create a pod can write into its
// owner reference: the owner's UID must be the Node's, which a pod's author does not
// choose. A Node whose UID is not known yet has no mirror pod.
func (n Node) IsMirrorPod(pod *corev1.Pod) bool {
	owner := metav1.GetControllerOfNoCopy(pod)
	return owner != nil && n.Name != "" && n.UID != "" && pod.Spec.NodeName == n.Name &&
		owner.APIVersion == "v1" && owner.Kind == "Node" && owner.Name == n.Name && owner.UID == n.UID
}

// IgnoresMirrorAnnotation reports whether pod carries the mirror annotation without being
// a mirror pod of n: PodUID then names the pod's own cgroup, by metadata.uid.
func (n Node) IgnoresMirrorAnnotation(pod *corev1.Pod) bool {
	return pod.Annotations[mirrorPodAnnotation] != "" && !n.IsMirrorPod(pod)
}

// NodeIdentity is the agent's Node as the API last named it: its name from the start, its
// UID once the node agent's reconciler has read it (SetUID). Until then no pod is a mirror
// pod of it, and a static pod is placed once the UID is known. Safe for concurrent use.
type NodeIdentity struct {
	name string
	uid  atomic.Value // types.UID
}

// NewNodeIdentity is the identity of the Node named name, its UID not known yet.
func NewNodeIdentity(name string) *NodeIdentity {
	n := &NodeIdentity{name: name}
	n.uid.Store(types.UID(""))
	return n
}

// SetUID records the Node's UID as read from the API.
func (n *NodeIdentity) SetUID(uid types.UID) { n.uid.Store(uid) }

// Node is the Node as known now.
func (n *NodeIdentity) Node() Node { return Node{Name: n.name, UID: n.uid.Load().(types.UID)} }
