// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package ctrltest

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/internal/testutil/testenv"
)

// RunSpecs runs the suite's specs, name in the report, once the envtest binaries are there
// (testenv.RequireEnvtest), with the timeouts and polling intervals every suite uses.
func RunSpecs(t *testing.T, name string) {
	testenv.RequireEnvtest(t)
	gomega.RegisterFailHandler(ginkgo.Fail)
	gomega.SetDefaultEventuallyTimeout(30 * time.Second)
	gomega.SetDefaultEventuallyPollingInterval(50 * time.Millisecond)
	gomega.SetDefaultConsistentlyPollingInterval(100 * time.Millisecond)
	ginkgo.RunSpecs(t, name)
}

// Env is a suite's API server: a real kube-apiserver and etcd with numapref's CRDs, and an
// admin client that reads the API directly (never a manager's cache).
type Env struct {
	Config *rest.Config
	Client client.Client
	Scheme *runtime.Scheme
	// Ctx ends when the suite stops: managers run under it.
	Ctx context.Context

	env    *envtest.Environment
	cancel context.CancelFunc
}

// Start starts the API server with the CRDs of crdDir (config/crd/bases, relative to the
// suite's package; a missing directory fails), from the suite's BeforeSuite.
func Start(crdDir string) *Env {
	ginkgo.GinkgoHelper()
	logf.SetLogger(zap.New(zap.WriteTo(ginkgo.GinkgoWriter), zap.UseDevMode(true)))
	scheme, err := NewScheme()
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	e := &Env{Scheme: scheme, env: &envtest.Environment{
		CRDDirectoryPaths:     []string{crdDir},
		ErrorIfCRDPathMissing: true,
	}}
	e.Ctx, e.cancel = context.WithCancel(context.Background())
	e.Config, err = e.env.Start()
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	e.Client, err = client.New(e.Config, client.Options{Scheme: scheme})
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	return e
}

// Stop ends the managers and stops the API server, from the suite's AfterSuite.
func (e *Env) Stop() {
	ginkgo.GinkgoHelper()
	e.cancel()
	gomega.Expect(e.env.Stop()).To(gomega.Succeed())
}

// RunManager starts mgr in a goroutine until stop or the end of the spec; done is closed
// once its Start returned.
func (e *Env) RunManager(mgr manager.Manager) (stop func(), done <-chan struct{}) {
	ginkgo.GinkgoHelper()
	ctx, cancel := context.WithCancel(e.Ctx)
	finished := make(chan struct{})
	go func() {
		defer ginkgo.GinkgoRecover()
		defer close(finished)
		gomega.Expect(mgr.Start(ctx)).To(gomega.Succeed())
	}()
	var once atomic.Bool
	stop = func() {
		if once.CompareAndSwap(false, true) {
			cancel()
			<-finished
		}
	}
	ginkgo.DeferCleanup(stop)
	return stop, finished
}

// NewNamespace creates a namespace of a random name.
func (e *Env) NewNamespace(ctx context.Context) string {
	ginkgo.GinkgoHelper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "t-" + rand.String(6)}}
	gomega.Expect(e.Client.Create(ctx, ns)).To(gomega.Succeed())
	return ns.Name
}

// EnsureNode creates the Node name unless it exists.
func (e *Env) EnsureNode(name string) {
	ginkgo.GinkgoHelper()
	err := e.Client.Create(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}})
	if !apierrors.IsAlreadyExists(err) {
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
	}
}

// Preference reads NumaPreference ns/name, for an Eventually.
func (e *Env) Preference(ctx context.Context, ns, name string) func(gomega.Gomega) *numav1.NumaPreference {
	return func(g gomega.Gomega) *numav1.NumaPreference {
		var p numav1.NumaPreference
		g.Expect(e.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &p)).To(gomega.Succeed())
		return &p
	}
}
