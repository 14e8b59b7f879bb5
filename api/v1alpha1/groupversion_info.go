// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

// Package v1alpha1 holds the numa.numapref.io/v1alpha1 API: NumaPreference.
// +kubebuilder:object:generate=true
// +kubebuilder:ac:generate=true
// +groupName=numa.numapref.io
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of every type in this package.
	GroupVersion = schema.GroupVersion{Group: "numa.numapref.io", Version: "v1alpha1"}

	// SchemeGroupVersion is GroupVersion under the name generated code (the apply
	// configurations' utils.go) expects.
	SchemeGroupVersion = GroupVersion

	// SchemeBuilder registers the types of this package with a scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the types of this package to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
