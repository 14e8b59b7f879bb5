// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"net/http"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
)

// An agent started while the apiserver is unreachable must start all the same: its
// engine enforces the desired state it persisted. But its cache, scoped per type
// (NodeCacheOptions), must know when it is made whether each type is namespaced, which
// controller-runtime asks the API's discovery. So the agent maps its own kinds from a
// table; any other kind goes to discovery.

// agentKinds are the kinds the agent reads and writes, and whether they are namespaced.
var agentKinds = map[schema.GroupVersionKind]bool{
	corev1.SchemeGroupVersion.WithKind("Pod"):           true,
	corev1.SchemeGroupVersion.WithKind("Node"):          false,
	corev1.SchemeGroupVersion.WithKind("Event"):         true,
	eventsv1.SchemeGroupVersion.WithKind("Event"):       true,
	coordinationv1.SchemeGroupVersion.WithKind("Lease"): true,
	numav1.GroupVersion.WithKind("NumaPreference"):      true,
	numav1.GroupVersion.WithKind("NumaNodeReport"):      false,
	// FollowDevices' DRA devices (DRATopology): read directly, never cached.
	resourcev1.SchemeGroupVersion.WithKind("ResourceSlice"): false,
	resourcev1.SchemeGroupVersion.WithKind("ResourceClaim"): true,
}

// NodeRESTMapper is the agent's ctrl.Options.MapperProvider: agentKinds from the table,
// every other kind through discovery (controller-runtime's dynamic mapper, which asks the
// API when a kind is first used).
func NodeRESTMapper(c *rest.Config, httpClient *http.Client) (meta.RESTMapper, error) {
	discovered, err := apiutil.NewDynamicRESTMapper(c, httpClient)
	if err != nil {
		return nil, err
	}
	known := meta.NewDefaultRESTMapper(nil)
	for gvk, namespaced := range agentKinds {
		scope := meta.RESTScopeRoot
		if namespaced {
			scope = meta.RESTScopeNamespace
		}
		known.Add(gvk, scope)
	}
	return knownFirst{RESTMapper: discovered, known: known}, nil
}

// knownFirst maps kinds through known, and through the embedded mapper those known does
// not have.
type knownFirst struct {
	meta.RESTMapper
	known meta.RESTMapper
}

func (m knownFirst) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	if mapping, err := m.known.RESTMapping(gk, versions...); err == nil {
		return mapping, nil
	}
	return m.RESTMapper.RESTMapping(gk, versions...)
}

func (m knownFirst) RESTMappings(gk schema.GroupKind, versions ...string) ([]*meta.RESTMapping, error) {
	if mappings, err := m.known.RESTMappings(gk, versions...); err == nil && len(mappings) > 0 {
		return mappings, nil
	}
	return m.RESTMapper.RESTMappings(gk, versions...)
}

func (m knownFirst) KindFor(resource schema.GroupVersionResource) (schema.GroupVersionKind, error) {
	if gvk, err := m.known.KindFor(resource); err == nil {
		return gvk, nil
	}
	return m.RESTMapper.KindFor(resource)
}
