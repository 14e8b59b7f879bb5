// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build integration

package agent

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/numapref/numapref/internal/testutil/builders"
)

// createRunning creates pod and marks its containers running, with container IDs, the way
// the kubelet would (builders.MarkRunning).
func createRunning(ctx context.Context, pod *corev1.Pod) *corev1.Pod {
	GinkgoHelper()
	Expect(env.Client.Create(ctx, pod)).To(Succeed())
	builders.MarkRunning(pod)
	Expect(env.Client.Status().Update(ctx, pod)).To(Succeed())
	return pod
}

func keyOf(ns, name string) types.NamespacedName {
	return types.NamespacedName{Namespace: ns, Name: name}
}
