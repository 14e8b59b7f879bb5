// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/controllers/internal/status"
)

// agentPreference is what an agent keeps of a NumaPreference: its identity, lifecycle and
// spec, whose size the CRD bounds. Status, managedFields, labels, annotations, finalizers
// and owners go: no agent reads them, and metadata is bounded only by the apiserver's
// request size, so one tenant could otherwise fill every agent's memory.
func agentPreference(obj any) (any, error) {
	p, ok := obj.(*numav1.NumaPreference)
	if !ok {
		return obj, nil
	}
	return &numav1.NumaPreference{TypeMeta: p.TypeMeta, ObjectMeta: status.Identity(&p.ObjectMeta), Spec: p.Spec}, nil
}
