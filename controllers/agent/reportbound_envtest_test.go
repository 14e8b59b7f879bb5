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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/internal/nodeagent/desire"
)

var _ = Describe("A node report past the CRD's bound", func() {
	It("keeps 1,024 entries, counts the rest, and the apiserver accepts it", func() {
		ctx := context.Background()
		const node = "report-bound-node"
		env.EnsureNode(node)
		r := NewNodeAgentReconciler(env.Client, env.Client, node, nil, nil, testAgentOptions)
		// One namespace selects the pod with 1,030 preferences, another with one.
		big := podPlan{plan: desire.PodPlan{Namespace: "big"}}
		for i := range 1030 {
			big.plan.Selected = append(big.plan.Selected, fmt.Sprintf("p-%04d", i))
		}
		small := podPlan{plan: desire.PodPlan{Namespace: "small", Selected: []string{"q"}}}
		st := r.reportStatus([]podPlan{big, small}, nil, nil, testAgentOptions.Facts())
		Expect(r.applyReport(ctx, st)).To(Succeed())
		DeferCleanup(func() {
			Expect(client.IgnoreNotFound(env.Client.Delete(ctx, &numav1.NumaNodeReport{ObjectMeta: metav1.ObjectMeta{Name: node}}))).To(Succeed())
		})

		var got numav1.NumaNodeReport
		Expect(env.Client.Get(ctx, client.ObjectKey{Name: node}, &got)).To(Succeed())
		Expect(got.Status.Preferences).To(HaveLen(numav1.MaxReportPreferences))
		Expect(got.Status.OmittedPreferences).To(Equal(int32(1031 - numav1.MaxReportPreferences)))
		Expect(got.Status.Totals.Preferences).To(Equal(int32(1031)), "totals count every preference, omitted ones too")
		Expect(got.Status.Preferences).To(ContainElement(HaveField("Namespace", "small")),
			"a namespace with a thousand preferences must not crowd out another's")
	})

	// The bound is by entries; the bytes follow from the longest names the API allows: a
	// namespace of 63 characters and NumaPreference names of 253. At 1,024 such entries the
	// report must still fit etcd's request limit (1.5 MiB), which envtest's etcd keeps.
	It("fits etcd's request limit at 1,024 entries of the longest names", func() {
		ctx := context.Background()
		const node = "report-bound-longest"
		env.EnsureNode(node)
		r := NewNodeAgentReconciler(env.Client, env.Client, node, nil, nil, testAgentOptions)
		big := podPlan{plan: desire.PodPlan{Namespace: strings.Repeat("n", 63)}}
		for i := range 1030 {
			big.plan.Selected = append(big.plan.Selected, fmt.Sprintf("%s-%04d", strings.Repeat("p", 248), i))
		}
		st := r.reportStatus([]podPlan{big}, nil, nil, testAgentOptions.Facts())
		Expect(r.applyReport(ctx, st)).To(Succeed(), "the apiserver and etcd take the largest report")
		DeferCleanup(func() {
			Expect(client.IgnoreNotFound(env.Client.Delete(ctx, &numav1.NumaNodeReport{ObjectMeta: metav1.ObjectMeta{Name: node}}))).To(Succeed())
		})
		var got numav1.NumaNodeReport
		Expect(env.Client.Get(ctx, client.ObjectKey{Name: node}, &got)).To(Succeed())
		Expect(got.Status.Preferences).To(HaveLen(numav1.MaxReportPreferences))
		Expect(got.Status.Preferences[0].Name).To(HaveLen(253))
		data, err := json.Marshal(got)
		Expect(err).NotTo(HaveOccurred())
		fmt.Fprintf(GinkgoWriter, "the largest report: %d bytes of JSON\n", len(data))
		Expect(len(data)).To(BeNumerically("<", 1536*1024), "a report past etcd's limit would be refused")
	})
})
