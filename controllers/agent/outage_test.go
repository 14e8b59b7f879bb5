// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build integration

package agent

import (
	"context"
	"io"
	"net"
	"net/url"
	"path/filepath"
	"sync"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/log"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/internal/nodeagent/cgroups"
	"github.com/numapref/numapref/internal/nodeagent/nri"
	"github.com/numapref/numapref/internal/testutil/builders"
	"github.com/numapref/numapref/internal/testutil/ctrltest"
	"github.com/numapref/numapref/internal/testutil/hostlab"
)

// outageProxy is a TCP proxy between the agent and the apiserver that can be cut: from the
// agent's side, indistinguishable from the apiserver going away and coming back.
type outageProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	up     bool
	conns  []net.Conn
}

func startOutageProxy(target string) *outageProxy {
	GinkgoHelper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	Expect(err).NotTo(HaveOccurred())
	p := &outageProxy{ln: ln, target: target, up: true}
	go p.serve()
	DeferCleanup(func() { ln.Close(); p.cut() })
	return p
}

func (p *outageProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if !p.up {
			p.mu.Unlock()
			c.Close()
			continue
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		// A copy ends with an error when cut drops the connections: expected.
		go func() { _, _ = io.Copy(s, c); s.Close() }()
		go func() { _, _ = io.Copy(c, s); c.Close() }()
	}
}

// cut refuses new connections and drops the open ones.
func (p *outageProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.up = false
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

func (p *outageProxy) restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.up = true
}

var _ = Describe("Node agent during an apiserver outage", Ordered, func() {
	ctx := context.Background()
	var (
		ns    string
		host  *realHost
		agent *runningAgent
		proxy *outageProxy
		via   *rest.Config
	)

	BeforeAll(func() {
		u, err := url.Parse(env.Config.Host)
		Expect(err).NotTo(HaveOccurred())
		proxy = startOutageProxy(u.Host)
		via = rest.CopyConfig(env.Config)
		via.Host = "https://" + proxy.ln.Addr().String()
		host = newRealHost("node-outage", "")
		agent = host.start(via, 0)
		ns = env.NewNamespace(ctx)
	})

	It("keeps placing new processes while the apiserver is away, and reports them when it returns", func() {
		w := startLabPod(ctx, host.lab, ns, "node-outage", "db-0", map[string]string{"app": "db"}, 3)
		Expect(env.Client.Create(ctx, builders.MakePreference(ns, "db").Selector("app", "db").Node(0).Obj())).To(Succeed())
		before := placedAndReported(ctx, host, ns, "db", w, 4) // main + 3 threads at least

		proxy.cut()
		shell, forked, err := w.Fork()
		Expect(err).NotTo(HaveOccurred())
		Eventually(func(g Gomega) {
			g.Expect(emulatedNodes(g, host.emu, shell, forked)).To(HaveEach(0))
		}).Should(Succeed(), "enforcement must not depend on the apiserver")
		Consistently(func(g Gomega) {
			g.Expect(env.Preference(ctx, ns, "db")(g).Status.Summary.Tasks).To(Equal(before))
		}, "1s").Should(Succeed(), "the outage is real: the agent cannot report meanwhile")

		proxy.restore()
		Eventually(func(g Gomega) {
			g.Expect(env.Preference(ctx, ns, "db")(g).Status.Summary.Tasks).To(BeNumerically(">=", before+2))
		}).Should(Succeed(), "status catches up once the apiserver is back")
	})

	It("restarted in the middle of an outage, enforces the desired state it persisted: forks are placed before the API returns", func() {
		w := startLabPod(ctx, host.lab, ns, "node-outage", "cache-0", map[string]string{"app": "cache"}, 2)
		Expect(env.Client.Create(ctx, builders.MakePreference(ns, "cache").Selector("app", "cache").Node(0).Obj())).To(Succeed())
		before := placedAndReported(ctx, host, ns, "cache", w, 3)

		proxy.cut()
		agent.stop() // the agent's pod restarts while the apiserver is away
		whileDown, forkedWhileDown, err := w.Fork()
		Expect(err).NotTo(HaveOccurred())
		// The shell inherited the node (Go's exec is a CLONE_VM child); its fork() child did not.
		Expect(emulatedNodes(Default, host.emu, forkedWhileDown)).To(HaveEach(-1), "no agent runs: nothing placed it yet")
		// The restarted agent reads nothing from the API. Its controllers wait for their
		// caches past the manager's default sync timeout, here 3s instead of 2 minutes.
		agent = host.start(via, 3*time.Second)
		Eventually(func(g Gomega) {
			g.Expect(emulatedNodes(g, host.emu, whileDown, forkedWhileDown)).To(HaveEach(0))
		}).Should(Succeed(), "the restarted agent enforces the persisted desired state at once")
		shell, forked, err := w.Fork()
		Expect(err).NotTo(HaveOccurred())
		Eventually(func(g Gomega) {
			g.Expect(emulatedNodes(g, host.emu, shell, forked)).To(HaveEach(0))
		}).Should(Succeed(), "fork events are handled without the API")
		Consistently(agent.done, "4s").ShouldNot(BeClosed(), "the agent must not exit while the API is away")

		proxy.restore()
		Eventually(func(g Gomega) {
			g.Expect(env.Preference(ctx, ns, "cache")(g).Status.Summary.Tasks).To(BeNumerically(">=", before+4))
		}).Should(Succeed(), "the caches catch up and the status with them")
		Expect(emulatedNodes(Default, host.emu, w.Pid(), whileDown, forkedWhileDown, shell, forked)).To(HaveEach(0),
			"the live desired state, which replaced the persisted one, keeps them")
	})

	It("restarted in the middle of an outage, places a container the runtime starts from the NumaPreferences it persisted", func() {
		agent = host.start(via, 0) // the last spec's agent ended with it
		Expect(env.Client.Create(ctx, builders.MakePreference(ns, "web").Selector("app", "web").Node(0).Obj())).To(Succeed())
		// The kubelet learns of pod web-0 before the outage; its container does not run yet.
		pod := builders.MakePod(ns, "web-0").Node("node-outage").Label("app", "web").Containers("main").Obj()
		Expect(env.Client.Create(ctx, pod)).To(Succeed())
		// The agent keeps the NumaPreferences of the namespaces with pods on its node.
		Eventually(func(g Gomega) {
			prefs, ok := nri.NewPreferenceStore(filepath.Join(host.stateDir, "preferences.json"), logr.Discard()).InNamespace(ns)
			g.Expect(ok).To(BeTrue())
			g.Expect(prefs).To(ContainElement(HaveField("Name", "web")))
		}).Should(Succeed(), "the agent persisted NumaPreference web")

		proxy.cut()
		agent.stop()
		agent = host.start(via, 3*time.Second)
		// runc create of web-0's container: the restarted agent's cache has nothing at all.
		const id = "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"
		c, err := host.lab.Container(corev1.PodQOSBestEffort, string(pod.UID), id)
		Expect(err).NotTo(HaveOccurred())
		init, err := c.StartWorkload(0)
		Expect(err).NotTo(HaveOccurred())
		runtime := connectPlugin(nri.NewStartPlacer(agent.mgr.GetClient(), cgroups.NewNodeIdentity("node-outage"), host.engine, host.prefs, log.Log.WithName("start")))
		startContainer(runtime, pod, id, init.Pid())
		node, err := host.emu.Get(init.Pid())
		Expect(err).NotTo(HaveOccurred())
		Expect(node).To(Equal(0), "the init task's node when the runtime's StartContainer returns, with no API and no cache")
		proxy.restore()
	})
})

// placedAndReported waits until every task of w's process has node 0 and preference
// name reports Ready with at least min tasks, and returns its task count: a later write
// is then not one still in flight from before.
func placedAndReported(ctx context.Context, host *realHost, ns, name string, w *hostlab.Workload, min int32) int32 {
	GinkgoHelper()
	var tasks int32
	Eventually(func(g Gomega) {
		g.Expect(emulatedNodes(g, host.emu, w.Pid())).To(HaveEach(0))
		p := env.Preference(ctx, ns, name)(g)
		g.Expect(ctrltest.Condition(p, numav1.ConditionReady).Status).To(Equal(metav1.ConditionTrue))
		tasks = p.Status.Summary.Tasks
		g.Expect(tasks).To(BeNumerically(">=", min))
	}).Should(Succeed())
	return tasks
}
