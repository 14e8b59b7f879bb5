// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build integration

package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/controllers/internal/status"
	"github.com/numapref/numapref/internal/testutil/builders"
	"github.com/numapref/numapref/internal/testutil/largest"
)

// largestPreferenceBytes bounds the JSON of the largest valid NumaPreference, managedFields
// left out (docs/concepts/status-at-scale.md, "Bounded objects"). It fails when a bound grows.
const largestPreferenceBytes = 32 << 10

var _ = Describe("NumaPreference bounds", func() {
	ctx := context.Background()
	var ns string
	BeforeEach(func() { ns = env.NewNamespace(ctx) })

	oneExpression := func(key string, values ...string) numav1.LabelSelector {
		return numav1.LabelSelector{MatchExpressions: []numav1.LabelSelectorRequirement{{Key: key, Operator: metav1.LabelSelectorOpIn, Values: values}}}
	}
	many := func(n, length int) []string {
		out := make([]string, n)
		for i := range out {
			s := fmt.Sprintf("v%d-", i)
			out[i] = s + strings.Repeat("x", length-len(s))
		}
		return out
	}
	DescribeTable("the apiserver refuses an oversized selector, with a message",
		func(sel numav1.LabelSelector, messages ...string) {
			p := builders.MakePreference(ns, "big").Node(0).Obj()
			p.Spec.Selector = sel
			err := env.Client.Create(ctx, p)
			Expect(err).To(HaveOccurred())
			for _, m := range messages {
				Expect(err.Error()).To(ContainSubstring(m))
			}
		},
		Entry("too many matchLabels", func() numav1.LabelSelector {
			s := numav1.LabelSelector{MatchLabels: map[string]string{}}
			for _, k := range many(numav1.MaxSelectorLabels+1, 10) {
				s.MatchLabels[k] = "v"
			}
			return s
		}(), "spec.selector.matchLabels", "must have at most 16"),
		Entry("a too long matchLabels key", numav1.LabelSelector{MatchLabels: map[string]string{strings.Repeat("k", 318): "v"}},
			"selector label keys must be at most 317 characters"),
		Entry("a too long matchLabels value", numav1.LabelSelector{MatchLabels: map[string]string{"app": strings.Repeat("v", 64)}},
			"selector label values must be at most 63 characters"),
		Entry("too many matchExpressions", func() numav1.LabelSelector {
			s := numav1.LabelSelector{}
			for _, k := range many(numav1.MaxSelectorExpressions+1, 10) {
				s.MatchExpressions = append(s.MatchExpressions, numav1.LabelSelectorRequirement{Key: k, Operator: metav1.LabelSelectorOpExists})
			}
			return s
		}(), "spec.selector.matchExpressions", "must have at most 8 items"),
		Entry("too many values", oneExpression("app", many(numav1.MaxSelectorValues+1, 10)...),
			"spec.selector.matchExpressions[0].values", "must have at most 16 items"),
		Entry("a too long value", oneExpression("app", strings.Repeat("v", 64)),
			"spec.selector.matchExpressions[0].values[0]", "Too long"),
		Entry("a too long expression key", oneExpression(strings.Repeat("k", 318), "v"),
			"spec.selector.matchExpressions[0].key", "Too long"),
	)

	It("accepts the largest valid object, which stays small", func() {
		p := largest.NumaPreference(ns, 0)
		Expect(env.Client.Create(ctx, p)).To(Succeed())
		withFields, err := json.Marshal(p)
		Expect(err).NotTo(HaveOccurred())
		p.ManagedFields = nil
		data, err := json.Marshal(p)
		Expect(err).NotTo(HaveOccurred())
		AddReportEntry("largest valid NumaPreference", fmt.Sprintf("%d bytes of JSON, %d with its managedFields", len(data), len(withFields)))
		GinkgoWriter.Printf("largest valid NumaPreference: %d bytes of JSON, %d with its managedFields\n", len(data), len(withFields))
		Expect(len(data)).To(BeNumerically("<=", largestPreferenceBytes))
	})

	It("reaches an agent's cache without status and unbounded metadata", func() {
		p := largest.NumaPreference(ns, 1)
		p.Annotations = map[string]string{"big": strings.Repeat("a", 200<<10)}
		Expect(env.Client.Create(ctx, p)).To(Succeed())
		p.Status.ObservedGeneration, p.Status.Summary.Pods = p.Generation, 3
		Expect(env.Client.Status().Update(ctx, p)).To(Succeed())

		// The agent's cache itself is under test here, not the controllers reading it.
		opts := NodeCacheOptions("node-bounds", NewPreferenceCap(status.DefaultMaxPreferencesPerNamespace))
		opts.Scheme = env.Scheme
		c, err := cache.New(env.Config, opts)
		Expect(err).NotTo(HaveOccurred())
		cctx, stop := context.WithCancel(ctx)
		DeferCleanup(stop)
		go func() {
			defer GinkgoRecover()
			Expect(c.Start(cctx)).To(Succeed())
		}()
		var cached numav1.NumaPreference
		Eventually(func() error { return c.Get(ctx, client.ObjectKeyFromObject(p), &cached) }).Should(Succeed())
		Expect(cached.Spec).To(Equal(p.Spec))
		Expect(cached.Status).To(Equal(numav1.NumaPreferenceStatus{}))
		Expect(cached.ManagedFields).To(BeNil())
		Expect(cached.Annotations).To(BeNil())
		Expect(cached.Generation).To(Equal(p.Generation))
		var pods corev1.PodList
		Expect(c.List(ctx, &pods)).To(Succeed(), "the other objects keep their options")
	})
})
