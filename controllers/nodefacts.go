package controllers

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
)

// NodeCacheOptions scopes an agent's cache to what its node needs: its own pods and its own
// NumaNodeReport, never other nodes'. NumaPreferences stay cached cluster-wide: their specs
// decide which pods are selected, and only the summarizer writes their status, coalesced.
func NodeCacheOptions(node string) cache.Options {
	return cache.Options{
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}:            {Field: fields.OneTermEqualSelector("spec.nodeName", node)},
			&numav1.NumaNodeReport{}: {Field: fields.OneTermEqualSelector("metadata.name", node)},
		},
		// Nothing reads managedFields from the cache (everything is server-side applied);
		// dropping them keeps the agent's memory small.
		DefaultTransform: cache.TransformStripManagedFields(),
	}
}
