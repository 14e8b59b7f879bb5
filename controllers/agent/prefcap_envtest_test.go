// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build integration

package agent

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/internal/metrics"
	"github.com/numapref/numapref/internal/testutil/builders"
	"github.com/numapref/numapref/internal/testutil/ctrltest"
)

var _ = Describe("A namespace past its cap of NumaPreferences", func() {
	ctx := context.Background()

	It("has its newest marked TooManyPreferences and applied by no agent, until an older one goes", func() {
		ns := env.NewNamespace(ctx)
		engine := newScriptedEngine(nil)
		startAgent("node-a", engine, withSummarizer(), withPreferenceCap(2))
		heldOverCap := func() float64 {
			return testutil.ToFloat64(metrics.PreferencesHeldBack.WithLabelValues(metrics.HeldOverCap))
		}
		before := heldOverCap()

		for _, p := range []*numav1.NumaPreference{
			builders.MakePreference(ns, "p0").Selector("app", "a").Node(0).Obj(),
			builders.MakePreference(ns, "p1").Selector("app", "b").Node(0).Obj(),
			builders.MakePreference(ns, "p2").Selector("app", "c").Node(1).Obj(),
		} {
			Expect(env.Client.Create(ctx, p)).To(Succeed())
		}
		pod := createRunning(ctx, builders.MakePod(ns, "c-0").Node("node-a").Label("app", "c").Containers("app").Obj())

		Eventually(func(g Gomega) {
			p := env.Preference(ctx, ns, "p2")(g)
			ready := ctrltest.Condition(p, numav1.ConditionReady)
			g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(ready.Reason).To(Equal(numav1.ReasonTooManyPreferences))
			g.Expect(ready.Message).To(ContainSubstring("holds 3 NumaPreferences, more than the 2"))
			g.Expect(ctrltest.Condition(p, numav1.ConditionDegraded).Reason).To(Equal(numav1.ReasonTooManyPreferences))
			g.Expect(heldOverCap() - before).To(Equal(1.0))
		}).Should(Succeed())
		Consistently(func() bool {
			_, ok := engine.Desired(pod, "app")
			return ok
		}, "1s").Should(BeFalse(), "a preference past the cap selects no pod")
		Expect(ctrltest.Condition(env.Preference(ctx, ns, "p0")(Default), numav1.ConditionReady).Reason).To(Equal(numav1.ReasonNoMatchingPods))

		Expect(env.Client.Delete(ctx, builders.MakePreference(ns, "p0").Obj())).To(Succeed())
		Eventually(func(g Gomega) {
			d, ok := engine.Desired(pod, "app")
			g.Expect(ok).To(BeTrue())
			g.Expect(d.Node).To(Equal(1))
			g.Expect(d.Preference).To(Equal("p2"))
			g.Expect(ctrltest.Condition(env.Preference(ctx, ns, "p2")(g), numav1.ConditionReady).Reason).NotTo(Equal(numav1.ReasonTooManyPreferences))
			g.Expect(heldOverCap() - before).To(Equal(0.0))
		}).Should(Succeed())
	})
})
