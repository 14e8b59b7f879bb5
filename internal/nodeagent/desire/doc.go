// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

// Package desire turns the API's objects into what each container of a node's pods should
// get: PlanPod decides, for a pod and the NumaPreferences of its namespace, each
// container's Desire (a node, or an automatic mode with its group and weight, or a reason
// not to act) and the Conflicts between preferences; PlanStart decides the same for a
// container the runtime is about to start, before the API reports it running.
//
// It is pure (no I/O, no clock) and is the vocabulary every other part of the agent shares:
// the engine's desired state is a map of Desires by ContainerKey.
package desire
