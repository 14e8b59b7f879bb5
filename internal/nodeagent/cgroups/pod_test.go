// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package cgroups

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// A mirror pod chooses a static pod's cgroup only when its controller is the agent's own
// Node, by name and UID: the name is public, and anyone who may create a pod bound to the
// node can write it into an owner reference.
func TestNodeMirrorPod(t *testing.T) {
	node := Node{Name: "node-a", UID: "8c4a1f0e-node-a"}
	controller := func(name string, uid string) metav1.OwnerReference {
		return metav1.OwnerReference{APIVersion: "v1", Kind: "Node", Name: name, UID: k8stypes.UID(uid), Controller: ptr.To(true)}
	}
	tests := map[string]struct {
		node  Node
		owner []metav1.OwnerReference
		want  string
	}{
		"made by the node's kubelet":    {node: node, owner: []metav1.OwnerReference{controller("node-a", "8c4a1f0e-node-a")}, want: fxUIDBurstable},
		"the node's name, another UID":  {node: node, owner: []metav1.OwnerReference{controller("node-a", "forged")}, want: mirrorPodAPIUID},
		"the node's name, no UID":       {node: node, owner: []metav1.OwnerReference{controller("node-a", "")}, want: mirrorPodAPIUID},
		"the node's UID unknown yet":    {node: Node{Name: "node-a"}, owner: []metav1.OwnerReference{controller("node-a", "")}, want: mirrorPodAPIUID},
		"another node, by name and UID": {node: node, owner: []metav1.OwnerReference{controller("node-b", "8c4a1f0e-node-a")}, want: mirrorPodAPIUID},
		"no owner":                      {node: node, want: mirrorPodAPIUID},
		"the node's owner reference, not controlling": {node: node,
			owner: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: "node-a", UID: "8c4a1f0e-node-a"}}, want: mirrorPodAPIUID},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			pod := mirrorPod("node-a", tc.owner...)
			if diff := cmp.Diff(tc.want, tc.node.PodUID(&pod)); diff != "" {
				t.Errorf("PodUID (-want +got):\n%s", diff)
			}
			if got, want := tc.node.IsMirrorPod(&pod), tc.want == fxUIDBurstable; got != want {
				t.Errorf("IsMirrorPod = %v, want %v", got, want)
			}
			if got, want := tc.node.IgnoresMirrorAnnotation(&pod), tc.want == mirrorPodAPIUID; got != want {
				t.Errorf("IgnoresMirrorAnnotation = %v, want %v", got, want)
			}
		})
	}
	// A pod bound to another node is none of this node's mirror pods, even when its owner
	// names this node.
	pod := mirrorPod("node-b", controller("node-a", "8c4a1f0e-node-a"))
	if node.IsMirrorPod(&pod) {
		t.Error("a pod of node-b is a mirror pod of node-a")
	}
}
