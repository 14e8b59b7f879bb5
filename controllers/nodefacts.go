package controllers

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
)

// NodeCacheOptions scopes an agent's cache to what its node needs: its own pods and its own
// NumaNodeReport, never other nodes'. NumaPreferences stay cached cluster-wide: their specs
// decide which pods are selected, and only the summarizer writes their status, coalesced.
// Of a NumaPreference the cache keeps only what the agent reads (agentPreference).
func NodeCacheOptions(node string) cache.Options {
	return cache.Options{
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}:            {Field: fields.OneTermEqualSelector("spec.nodeName", node)},
			&numav1.NumaNodeReport{}: {Field: fields.OneTermEqualSelector("metadata.name", node)},
			&numav1.NumaPreference{}: {Transform: agentPreference},
		},
		// Nothing reads managedFields from the cache (everything is server-side applied);
		// dropping them keeps the agent's memory small.
		DefaultTransform: cache.TransformStripManagedFields(),
	}
}

// agentPreference is what an agent keeps of a NumaPreference: its identity, lifecycle and
// spec, whose size the CRD bounds. Status, managedFields, labels, annotations, finalizers
// and owners go: no agent reads them, and metadata is bounded only by the apiserver's
// request size, so one tenant could otherwise fill every agent's memory.
func agentPreference(obj any) (any, error) {
	p, ok := obj.(*numav1.NumaPreference)
	if !ok {
		return obj, nil
	}
	return &numav1.NumaPreference{
		TypeMeta: p.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Namespace: p.Namespace, Name: p.Name, UID: p.UID, ResourceVersion: p.ResourceVersion,
			Generation: p.Generation, CreationTimestamp: p.CreationTimestamp, DeletionTimestamp: p.DeletionTimestamp,
		},
		Spec: p.Spec,
	}, nil
}
