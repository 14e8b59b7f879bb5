// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build chart

package chart

import (
	"bytes"
	"context"
	"crypto/x509"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/numapref/numapref/internal/inspect"
	"github.com/numapref/numapref/internal/testutil/testenv"
)

// tlsState is what a release holds of its shared certificate in the cluster.
type tlsState struct {
	cert, key, published string
}

func readTLSState(t *testing.T, cs kubernetes.Interface) tlsState {
	t.Helper()
	ctx := context.Background()
	leaf, err := cs.CoreV1().Secrets(namespace).Get(ctx, tlsSecret, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm, err := cs.CoreV1().ConfigMaps(namespace).Get(ctx, inspect.CAConfigMap, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s := tlsState{cert: string(leaf.Data["tls.crt"]), key: string(leaf.Data["tls.key"]), published: cm.Data[inspect.CAConfigMapCAKey]}
	// Whatever happened, what is published verifies what is served.
	if s.published != s.cert || string(leaf.Data["ca.crt"]) != s.cert {
		t.Fatal("the ConfigMap and the serving Secret disagree on the certificate")
	}
	roots := x509.NewCertPool()
	roots.AddCert(parseCert(t, "published", []byte(s.published)))
	if _, err := parseCert(t, "tls.crt", []byte(s.cert)).Verify(x509.VerifyOptions{DNSName: serverName, Roots: roots}); err != nil {
		t.Fatalf("the served certificate does not verify with what is published: %v", err)
	}
	return s
}

// TestCertificatesAcrossUpgrades installs the chart into a real API server (envtest) and
// upgrades it: the shared self-signed certificate stays as it is (lookup), is made anew
// when it nears its end, and a release from before (a chart-made CA) gets one that needs no
// CA; per-node certificates leave the release no Secret. The signer's placement follows the
// control-plane Nodes the API has.
func TestCertificatesAcrossUpgrades(t *testing.T) {
	testenv.RequireEnvtest(t)
	env := &envtest.Environment{}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("starting envtest: %v", err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stopping envtest: %v", err)
		}
	})
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData}
	kc.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "admin"}
	kc.CurrentContext = "envtest"
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, kubeconfig); err != nil {
		t.Fatal(err)
	}
	helm := func(args ...string) {
		t.Helper()
		cmd := exec.Command(helmBinary(t), append(args, "--kubeconfig", kubeconfig, "--namespace", namespace)...)
		cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+t.TempDir(), "HELM_CONFIG_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			t.Fatalf("helm %v: %v\n%s", args, err, out.String())
		}
	}
	chart := filepath.Join(repoRoot(t), chartDir)
	// One certificate for every agent (tls.nodeCertificates off), then per node.
	shared := []string{"--set", "tls.nodeCertificates=false"}
	helm(append([]string{"install", release, chart, "--create-namespace"}, shared...)...)
	first := readTLSState(t, cs)

	helm(append([]string{"upgrade", release, chart, "--set", "rescanInterval=20s"}, shared...)...)
	if got := readTLSState(t, cs); got != first {
		t.Fatal("helm upgrade changed the serving certificate")
	}

	// The serving certificate nears its end (as helm upgrade reads it from the Secret): a
	// new one, with a new key, published.
	soon := strconv.FormatInt(time.Now().Add(24*time.Hour).Unix(), 10)
	patch := fmt.Sprintf(`{"metadata":{"annotations":{"numapref.io/not-after":%q}}}`, soon)
	if _, err := cs.CoreV1().Secrets(namespace).Patch(context.Background(), tlsSecret, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	helm(append([]string{"upgrade", release, chart}, shared...)...)
	renewed := readTLSState(t, cs)
	if renewed.cert == first.cert || renewed.key == first.key {
		t.Error("a serving certificate 1 day from its end was kept (renewBeforeDays is 30)")
	}

	// Per-node certificates (the default): the shared certificate and the ConfigMap are no
	// longer the release's (the signer publishes the ConfigMap; none runs here), and no
	// Secret of the release holds a key.
	helm("upgrade", release, chart, "--reset-values")
	if _, err := cs.CoreV1().Secrets(namespace).Get(context.Background(), tlsSecret, metav1.GetOptions{}); err == nil {
		t.Error("per-node certificates left the shared serving Secret")
	}
	secrets, err := cs.CoreV1().Secrets(namespace).List(context.Background(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + release})
	if err != nil || len(secrets.Items) != 0 {
		t.Errorf("the release's Secrets with per-node certificates: %d (%v), want none", len(secrets.Items), err)
	}
	// envtest runs no Job: the uninstall check's pre-delete hook would wait out helm's
	// timeout. The hook is rendered in TestUninstallHook and run by the e2e.
	helm("uninstall", release, "--no-hooks")
	if _, err := cs.CoreV1().ConfigMaps(namespace).Get(context.Background(), inspect.CAConfigMap, metav1.GetOptions{}); err == nil {
		t.Error("helm uninstall left the CA ConfigMap")
	}

	// The signer goes on a control-plane node once the API has one (looked up at install).
	affinity := func() string {
		t.Helper()
		cmd := exec.Command(helmBinary(t), "template", release, chart, "--dry-run=server", "--kubeconfig", kubeconfig, "--namespace", namespace,
			"--show-only", "templates/signer.yaml")
		cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+t.TempDir(), "HELM_CONFIG_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("helm template --dry-run=server: %v\n%s", err, out)
		}
		return string(out)
	}
	if out := affinity(); strings.Contains(out, "node-role.kubernetes.io/control-plane") {
		t.Error("the signer is kept to control-plane nodes in a cluster that has none")
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "cp-0", Labels: map[string]string{"node-role.kubernetes.io/control-plane": ""}}}
	if _, err := cs.CoreV1().Nodes().Create(context.Background(), node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	out := affinity()
	if !strings.Contains(out, "requiredDuringSchedulingIgnoredDuringExecution") || !strings.Contains(out, "effect: NoSchedule") {
		t.Errorf("with a control-plane Node the signer is not kept to it, tolerating its taint:\n%s", out)
	}
}
