//go:build integration

package controllers

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/internal/testutil/hostlab"
	"github.com/numapref/numapref/internal/testutil/testenv"
)

// These tests run the controllers against a real kube-apiserver and etcd (envtest): the
// integration tier (build tag integration). The binaries come from hack/k8s-binaries.sh
// through KUBEBUILDER_ASSETS (make integration sets it). The real-engine specs
// (realengine_test.go, outage_test.go) also need root.

var (
	testEnv   *envtest.Environment
	cfg       *rest.Config
	k8sClient client.Client // direct, uncached: assertions never read a manager's cache
	scheme    = runtime.NewScheme()
	suiteCtx  context.Context
	cancel    context.CancelFunc
)

func TestMain(m *testing.M) {
	hostlab.RunWorkloadIfAsked() // workloads of the real-engine specs are this binary
	os.Exit(m.Run())
}

func TestControllers(t *testing.T) {
	testenv.RequireEnvtest(t)
	RegisterFailHandler(Fail)
	SetDefaultEventuallyTimeout(30 * time.Second)
	SetDefaultEventuallyPollingInterval(50 * time.Millisecond)
	SetDefaultConsistentlyPollingInterval(100 * time.Millisecond)
	RunSpecs(t, "Controller Suite")
}

var _ = BeforeSuite(func() {
	logf.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	suiteCtx, cancel = context.WithCancel(context.Background())
	Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
	Expect(numav1.AddToScheme(scheme)).To(Succeed())

	testEnv = &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("..", "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
	}
	var err error
	cfg, err = testEnv.Start()
	Expect(err).NotTo(HaveOccurred())
	k8sClient, err = client.New(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
})

var _ = AfterSuite(func() {
	cancel()
	Expect(testEnv.Stop()).To(Succeed())
})

// The specs coalesce writes over short times, to run fast; the coalescing itself is
// tested with a fake clock (TestSummaryCoalescing).
var (
	testAgentOptions = NodeAgentOptions{
		ReportInterval: 100 * time.Millisecond,
		Facts:          func() NodeFacts { return NodeFacts{KernelSupport: "emulator", NUMABalancing: "normal", NUMANodes: 1} },
	}
	testSummaryOptions = SummaryOptions{Quiet: 50 * time.Millisecond, MaxDelay: 200 * time.Millisecond, MinInterval: 100 * time.Millisecond}
)

// ensureNode creates the Node object an agent runs on (the report is owned by it).
func ensureNode(name string) {
	GinkgoHelper()
	err := k8sClient.Create(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}})
	if !apierrors.IsAlreadyExists(err) {
		Expect(err).NotTo(HaveOccurred())
	}
}

// agentSetup is how startAgent runs an agent; agentOptions change it.
type agentSetup struct {
	cfg         *rest.Config // how the agent reaches the apiserver
	opts        NodeAgentOptions
	summarize   bool          // run the summary controller beside the agent
	syncTimeout time.Duration // the manager's default CacheSyncTimeout (0: controller-runtime's 2 minutes)
	runnables   []manager.Runnable
}

type agentOption func(*agentSetup)

// withSummarizer runs the summary controller in the agent's manager.
func withSummarizer() agentOption { return func(s *agentSetup) { s.summarize = true } }

// withConfig has the agent reach the apiserver through c instead of the suite's config.
func withConfig(c *rest.Config) agentOption { return func(s *agentSetup) { s.cfg = c } }

// withOptions sets the node agent's options instead of testAgentOptions.
func withOptions(o NodeAgentOptions) agentOption { return func(s *agentSetup) { s.opts = o } }

// withRunnables adds runnables to the agent's manager.
func withRunnables(r ...manager.Runnable) agentOption {
	return func(s *agentSetup) { s.runnables = append(s.runnables, r...) }
}

// withSyncTimeout sets the manager's default CacheSyncTimeout for its controllers
// (controller-runtime's is 2 minutes), so that a spec can outlast it.
func withSyncTimeout(d time.Duration) agentOption { return func(s *agentSetup) { s.syncTimeout = d } }

// runningAgent is an agent's manager, running until stop (or the spec's end).
type runningAgent struct {
	mgr  manager.Manager
	done chan struct{} // closed once the manager's Start returned
	stop func()
}

// startAgent runs a manager like the agent's for one node, with the given engine, until
// stop or the end of the spec: by default through the suite's config, with
// testAgentOptions and without the summarizer.
func startAgent(node string, engine Engine, options ...agentOption) *runningAgent {
	GinkgoHelper()
	s := agentSetup{cfg: cfg, opts: testAgentOptions}
	for _, o := range options {
		o(&s)
	}
	mgr, err := ctrl.NewManager(s.cfg, ctrl.Options{
		Scheme:  scheme,
		Cache:   NodeCacheOptions(node),
		Metrics: metricsserver.Options{BindAddress: "0"},
		// Several agents share this test process; each has its own "nodeagent" controller.
		Controller:     config.Controller{SkipNameValidation: ptr.To(true), CacheSyncTimeout: s.syncTimeout},
		MapperProvider: NodeRESTMapper,
	})
	Expect(err).NotTo(HaveOccurred())
	ensureNode(node)
	Expect(SetupNodeAgent(mgr, node, engine, s.opts)).To(Succeed())
	for _, r := range s.runnables {
		Expect(mgr.Add(r)).To(Succeed())
	}
	if s.summarize {
		Expect(SetupSummary(mgr, testSummaryOptions)).To(Succeed())
	}
	ctx, cancel := context.WithCancel(suiteCtx)
	a := &runningAgent{mgr: mgr, done: make(chan struct{})}
	go func() {
		defer GinkgoRecover()
		defer close(a.done)
		Expect(mgr.Start(ctx)).To(Succeed())
	}()
	var once sync.Once
	a.stop = func() {
		once.Do(func() {
			cancel()
			<-a.done
		})
	}
	DeferCleanup(a.stop)
	return a
}
