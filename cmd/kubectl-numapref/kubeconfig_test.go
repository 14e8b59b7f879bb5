// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"flag"
	"path/filepath"
	"slices"
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// writeKubeconfig writes a kubeconfig for the API server at cfg whose user has token.
func writeKubeconfig(t *testing.T, cfg *rest.Config, token string) string {
	t.Helper()
	return writeKubeconfigFor(t, cfg, &clientcmdapi.AuthInfo{Token: token})
}

// writeKubeconfigFor writes a kubeconfig for the API server at cfg with user.
func writeKubeconfigFor(t *testing.T, cfg *rest.Config, user *clientcmdapi.AuthInfo) string {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["user"] = user
	kc.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "user", Namespace: "default"}
	kc.CurrentContext = "envtest"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// kubectl's overrides of the kubeconfig reach the client: --server, --as, --as-group,
// --cluster and --user, as every kubectl plugin that uses kubectl's flags takes them.
func TestKubeconfigOverrides(t *testing.T) {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["a"] = &clientcmdapi.Cluster{Server: "https://a.example:6443"}
	kc.Clusters["b"] = &clientcmdapi.Cluster{Server: "https://b.example:6443"}
	kc.AuthInfos["alice"] = &clientcmdapi.AuthInfo{Token: "alice-token"}
	kc.AuthInfos["bob"] = &clientcmdapi.AuthInfo{Token: "bob-token"}
	kc.Contexts["a"] = &clientcmdapi.Context{Cluster: "a", AuthInfo: "alice"}
	kc.CurrentContext = "a"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		args            []string
		host, token, as string
		groups          []string
	}{
		"none":    {args: nil, host: "https://a.example:6443", token: "alice-token"},
		"server":  {args: []string{"--server", "https://c.example:6443"}, host: "https://c.example:6443", token: "alice-token"},
		"cluster": {args: []string{"--cluster", "b"}, host: "https://b.example:6443", token: "alice-token"},
		"user":    {args: []string{"--user", "bob"}, host: "https://a.example:6443", token: "bob-token"},
		"as":      {args: []string{"--as", "carol", "--as-group", "devs", "--as-group", "ops"}, host: "https://a.example:6443", token: "alice-token", as: "carol", groups: []string{"devs", "ops"}},
	} {
		t.Run(name, func(t *testing.T) {
			var o commonOptions
			fs := flag.NewFlagSet("test", flag.ContinueOnError)
			o.register(fs, "pod", "")
			if err := fs.Parse(append([]string{"--kubeconfig", path}, c.args...)); err != nil {
				t.Fatal(err)
			}
			cfg, _, err := o.loadKubeconfig()
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Host != c.host || cfg.BearerToken != c.token || cfg.Impersonate.UserName != c.as || !slices.Equal(cfg.Impersonate.Groups, c.groups) {
				t.Errorf("config: host %s, token %s, as %q %v; want %s, %s, %q %v",
					cfg.Host, cfg.BearerToken, cfg.Impersonate.UserName, cfg.Impersonate.Groups, c.host, c.token, c.as, c.groups)
			}
		})
	}
}
