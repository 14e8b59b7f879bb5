// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build integration

package summarizer

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/internal/testutil/ctrltest"
)

// These specs run the summarizer against a real kube-apiserver and etcd (envtest): the
// integration tier (build tag integration). They write the nodes' reports themselves, as
// the agents would; controllers/agent's specs run agents and the summarizer together.

// env is the suite's API server; env.Client reads it directly, never a manager's cache.
var env *ctrltest.Env

func TestSummarizer(t *testing.T) { ctrltest.RunSpecs(t, "Summarizer Suite") }

var _ = BeforeSuite(func() { env = ctrltest.Start(filepath.Join("..", "..", "config", "crd", "bases")) })

var _ = AfterSuite(func() { env.Stop() })

// testSummaryOptions coalesce writes over short times, to run fast; the coalescing itself
// is tested with a fake clock (TestSummaryCoalescing).
var testSummaryOptions = SummaryOptions{Quiet: 50 * time.Millisecond, MaxDelay: 200 * time.Millisecond, MinInterval: 100 * time.Millisecond}

// startSummarizer runs the summarizer alone, as the elected one would, until stop or the
// end of the spec.
func startSummarizer() (stop func()) {
	GinkgoHelper()
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme: env.Scheme, Metrics: metricsserver.Options{BindAddress: "0"},
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	Expect(err).NotTo(HaveOccurred())
	Expect(SetupSummary(mgr, testSummaryOptions)).To(Succeed())
	stop, _ = env.RunManager(mgr)
	return stop
}

// writeReport makes node's report hold entries, as node's agent would; the report goes at
// the end of the spec.
func writeReport(ctx context.Context, node string, entries ...numav1.PreferenceReport) {
	GinkgoHelper()
	rep := &numav1.NumaNodeReport{}
	err := env.Client.Get(ctx, client.ObjectKey{Name: node}, rep)
	if apierrors.IsNotFound(err) {
		rep = &numav1.NumaNodeReport{ObjectMeta: metav1.ObjectMeta{Name: node},
			Status: numav1.NumaNodeReportStatus{NumaBalancing: "normal", Preferences: entries}}
		Expect(env.Client.Create(ctx, rep)).To(Succeed())
		DeferCleanup(func() { Expect(client.IgnoreNotFound(env.Client.Delete(ctx, rep))).To(Succeed()) })
		return
	}
	Expect(err).NotTo(HaveOccurred())
	rep.Status.Preferences = entries
	Expect(env.Client.Update(ctx, rep)).To(Succeed())
}
