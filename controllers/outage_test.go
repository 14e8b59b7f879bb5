//go:build integration

package controllers

import (
	"context"
	"io"
	"net"
	"net/url"
	"sync"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/internal/numa/emulator"
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
		go func() { io.Copy(s, c); s.Close() }()
		go func() { io.Copy(c, s); c.Close() }()
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
		lab   *hostlab.Lab
		emu   *emulator.Emulator
		proxy *outageProxy
	)

	BeforeAll(func() {
		u, err := url.Parse(cfg.Host)
		Expect(err).NotTo(HaveOccurred())
		proxy = startOutageProxy(u.Host)
		via := rest.CopyConfig(cfg)
		via.Host = "https://" + proxy.ln.Addr().String()
		lab, emu = startRealAgent(via, "node-outage")
		ns = newNamespace(ctx)
	})

	It("keeps placing new processes while the apiserver is away, and reports them when it returns", func() {
		w := startLabPod(ctx, lab, ns, "node-outage", "db-0", map[string]string{"app": "db"}, 3)
		Expect(k8sClient.Create(ctx, newPreference(ns, "db", 0, map[string]string{"app": "db"}))).To(Succeed())
		var before int32
		Eventually(func(g Gomega) {
			g.Expect(emulatedNodes(g, emu, w.Pid())).To(HaveEach(0))
			p := getPreference(ctx, ns, "db")(g)
			g.Expect(condition(p, numav1.ConditionReady).Status).To(Equal(metav1.ConditionTrue))
			before = p.Status.Summary.Tasks
			// The summary has caught up with the workload's tasks (main + 3 threads at
			// least): a later write is not one still in flight from before the cut.
			g.Expect(before).To(BeNumerically(">=", 4))
		}).Should(Succeed())

		proxy.cut()
		shell, forked, err := w.Fork()
		Expect(err).NotTo(HaveOccurred())
		Eventually(func(g Gomega) {
			g.Expect(emulatedNodes(g, emu, shell, forked)).To(HaveEach(0))
		}).Should(Succeed(), "enforcement must not depend on the apiserver")
		Consistently(func(g Gomega) {
			g.Expect(getPreference(ctx, ns, "db")(g).Status.Summary.Tasks).To(Equal(before))
		}, "1s").Should(Succeed(), "the outage is real: the agent cannot report meanwhile")

		proxy.restore()
		Eventually(func(g Gomega) {
			g.Expect(getPreference(ctx, ns, "db")(g).Status.Summary.Tasks).To(BeNumerically(">=", before+2))
		}).Should(Succeed(), "status catches up once the apiserver is back")
	})
})
