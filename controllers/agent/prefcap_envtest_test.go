// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build integration

package agent

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/internal/testutil/builders"
	"github.com/numapref/numapref/internal/testutil/ctrltest"
)

var _ = Describe("A namespace past its cap of NumaPreferences", func() {
	ctx := context.Background()

	It("has its newest marked TooManyPreferences and applied by no agent, until an older one goes", func() {
		ns := env.NewNamespace(ctx)
		engine := newScriptedEngine(nil)
		agent := startAgent("node-a", engine, withSummarizer(), withPreferenceCap(2))
		// What this agent's cache keeps of p2: its name only, or all of it. (The held-back
		// gauge is the test process's, shared by every agent of the suite, and other specs'
		// namespaces hold more than this spec's cap.)
		heldBack := func(g Gomega) bool {
			var p numav1.NumaPreference
			g.Expect(agent.mgr.GetCache().Get(ctx, client.ObjectKey{Namespace: ns, Name: "p2"}, &p)).To(Succeed())
			return HeldBack(&p)
		}

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
			g.Expect(heldBack(g)).To(BeTrue())
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
			g.Expect(heldBack(g)).To(BeFalse())
		}).Should(Succeed())
	})
})
