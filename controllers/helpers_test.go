//go:build integration

package controllers

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/internal/testutil/builders"
)

func newNamespace(ctx context.Context) string {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "t-" + rand.String(6)}}
	Expect(k8sClient.Create(ctx, ns)).To(Succeed())
	return ns.Name
}

// createRunning creates pod and marks its containers running, with container IDs, the way
// the kubelet would (builders.MarkRunning).
func createRunning(ctx context.Context, pod *corev1.Pod) *corev1.Pod {
	GinkgoHelper()
	Expect(k8sClient.Create(ctx, pod)).To(Succeed())
	builders.MarkRunning(pod)
	Expect(k8sClient.Status().Update(ctx, pod)).To(Succeed())
	return pod
}

func getPreference(ctx context.Context, ns, name string) func(Gomega) *numav1.NumaPreference {
	return func(g Gomega) *numav1.NumaPreference {
		var p numav1.NumaPreference
		g.Expect(k8sClient.Get(ctx, keyOf(ns, name), &p)).To(Succeed())
		return &p
	}
}

func keyOf(ns, name string) types.NamespacedName {
	return types.NamespacedName{Namespace: ns, Name: name}
}
