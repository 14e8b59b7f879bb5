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
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/numapref/numapref/internal/inspect"
	"github.com/numapref/numapref/internal/testutil/testenv"
)

// tlsState is what a release holds of its certificates in the cluster.
type tlsState struct {
	caCert, caKey, cert, key, published string
}

func readTLSState(t *testing.T, cs kubernetes.Interface) tlsState {
	t.Helper()
	ctx := context.Background()
	ca, err := cs.CoreV1().Secrets(namespace).Get(ctx, caSecret, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := cs.CoreV1().Secrets(namespace).Get(ctx, tlsSecret, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm, err := cs.CoreV1().ConfigMaps(namespace).Get(ctx, inspect.CAConfigMap, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s := tlsState{caCert: string(ca.Data["tls.crt"]), caKey: string(ca.Data["tls.key"]),
		cert: string(leaf.Data["tls.crt"]), key: string(leaf.Data["tls.key"]), published: cm.Data[inspect.CAConfigMapCAKey]}
	// Whatever happened, what is published verifies what is served.
	if s.published != s.caCert || string(leaf.Data["ca.crt"]) != s.caCert {
		t.Fatal("the ConfigMap, the CA Secret and the serving Secret disagree on the CA")
	}
	roots := x509.NewCertPool()
	roots.AddCert(parseCert(t, "CA", []byte(s.caCert)))
	if _, err := parseCert(t, "tls.crt", []byte(s.cert)).Verify(x509.VerifyOptions{DNSName: serverName, Roots: roots}); err != nil {
		t.Fatalf("the served certificate does not verify with the published CA: %v", err)
	}
	return s
}

// TestCertificatesAcrossUpgrades installs the chart into a real API server (envtest) and
// upgrades it: the CA and the serving certificate stay as they are (lookup), the
// certificate is re-signed by the same CA when it nears its end, and a lost CA is replaced
// along with everything it signed.
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
		t.Fatal("helm upgrade changed the CA or the serving certificate")
	}

	// The serving certificate nears its end (as helm upgrade reads it from the Secret):
	// re-signed, by the same CA, with a new key.
	soon := strconv.FormatInt(time.Now().Add(24*time.Hour).Unix(), 10)
	patch := fmt.Sprintf(`{"metadata":{"annotations":{"numapref.io/not-after":%q}}}`, soon)
	if _, err := cs.CoreV1().Secrets(namespace).Patch(context.Background(), tlsSecret, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	helm(append([]string{"upgrade", release, chart}, shared...)...)
	renewed := readTLSState(t, cs)
	if renewed.caCert != first.caCert || renewed.caKey != first.caKey || renewed.published != first.published {
		t.Error("renewing the serving certificate changed the CA")
	}
	if renewed.cert == first.cert || renewed.key == first.key {
		t.Error("a serving certificate 1 day from its end was kept (renewBeforeDays is 30)")
	}

	// The CA Secret is lost: a new CA, published, and a certificate it signed.
	if err := cs.CoreV1().Secrets(namespace).Delete(context.Background(), caSecret, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	helm(append([]string{"upgrade", release, chart}, shared...)...)
	replaced := readTLSState(t, cs)
	if replaced.caCert == renewed.caCert || replaced.cert == renewed.cert {
		t.Error("after the CA Secret was deleted, the old CA or a certificate it signed stayed")
	}

	// Per-node certificates (the default): the same CA, which the summarizer signs with;
	// the shared certificate gone, and clients told to verify the node. (An upgrade without
	// values would reuse the release's.)
	helm("upgrade", release, chart, "--reset-values")
	ca, err := cs.CoreV1().Secrets(namespace).Get(context.Background(), caSecret, metav1.GetOptions{})
	if err != nil || string(ca.Data["tls.crt"]) != replaced.caCert || string(ca.Data["tls.key"]) != replaced.caKey {
		t.Errorf("per-node certificates changed or lost the CA (%v)", err)
	}
	if _, err := cs.CoreV1().Secrets(namespace).Get(context.Background(), tlsSecret, metav1.GetOptions{}); err == nil {
		t.Error("per-node certificates left the shared serving Secret")
	}
	cm, err := cs.CoreV1().ConfigMaps(namespace).Get(context.Background(), inspect.CAConfigMap, metav1.GetOptions{})
	if err != nil || cm.Data[inspect.CAConfigMapVerifyKey] != inspect.VerifyNode || cm.Data[inspect.CAConfigMapCAKey] != replaced.caCert {
		t.Errorf("CA ConfigMap after the switch to per-node certificates: %v, %v", cm.Data, err)
	}
	helm("uninstall", release)
	if _, err := cs.CoreV1().ConfigMaps(namespace).Get(context.Background(), inspect.CAConfigMap, metav1.GetOptions{}); err == nil {
		t.Error("helm uninstall left the CA ConfigMap")
	}
}
