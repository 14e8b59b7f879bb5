// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

// Package testenv states what a test needs from the machine it runs on. A test that lacks
// a precondition is skipped with the command that provides it when run by hand, and fails
// when run under CI (CI=true), which is meant to provide every precondition: a skipped test
// proves nothing, so CI must never pass because of one.
//
// Every t.Skip in the project's tests goes through Require or one of its wrappers, except
// the ones that select rather than skip (a conformance backend, the real kernel's case on
// a kernel without the patch), which say so where they are.
package testenv

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// InCI reports whether the tests run under CI, where every precondition is provided.
func InCI() bool { return os.Getenv("CI") == "true" }

// Require stops t unless ok: what names the missing precondition, fix how to provide it.
// By hand t is skipped; under CI it fails.
func Require(t testing.TB, ok bool, what, fix string) {
	t.Helper()
	if ok {
		return
	}
	if InCI() {
		t.Fatalf("precondition missing under CI=true: %s (CI must provide it: %s)", what, fix)
	}
	t.Skipf("precondition missing: %s; to run this test: %s", what, fix)
}

// RequireNoError is Require for a precondition checked by an operation that failed with err.
func RequireNoError(t testing.TB, err error, what, fix string) {
	t.Helper()
	if err != nil {
		Require(t, false, fmt.Sprintf("%s: %v", what, err), fix)
	}
}

// RequireRoot needs uid 0: the host tier (make host) changes cgroups and reads other
// users' tasks.
func RequireRoot(t testing.TB) {
	t.Helper()
	Require(t, os.Geteuid() == 0, "root (uid 0)", "sudo make host")
}

// RequireEnvtest needs a kube-apiserver and etcd for envtest and returns their directory
// (KUBEBUILDER_ASSETS).
func RequireEnvtest(t testing.TB) string {
	t.Helper()
	dir := os.Getenv("KUBEBUILDER_ASSETS")
	ok := dir != "" && isExecutable(filepath.Join(dir, "kube-apiserver")) && isExecutable(filepath.Join(dir, "etcd"))
	Require(t, ok, fmt.Sprintf("kube-apiserver and etcd in KUBEBUILDER_ASSETS (%q)", dir),
		"make integration (it builds them with hack/k8s-binaries.sh)")
	return dir
}

// RequireHelm needs the helm binary named by HELM, or helm on PATH, and returns its path.
func RequireHelm(t testing.TB) string {
	t.Helper()
	path := os.Getenv("HELM")
	if path == "" {
		path, _ = exec.LookPath("helm")
	}
	Require(t, path != "" && isExecutable(path), "helm (HELM or PATH)", "make chart-test (hack/tools.sh helm installs it)")
	return path
}

// RequireFile needs path to exist; fix says what provides it.
func RequireFile(t testing.TB, path, fix string) {
	t.Helper()
	_, err := os.Stat(path)
	Require(t, err == nil, fmt.Sprintf("%s (%v)", path, errors.Unwrap(err)), fix)
}

func isExecutable(path string) bool {
	st, err := os.Stat(path)
	return err == nil && !st.IsDir() && st.Mode()&0o111 != 0
}

// UnreachableKubeconfig is a kubeconfig of an API server nobody runs (port 1 of the
// loopback): an agent started with it works from what it persisted, as it does while the
// API is down.
const UnreachableKubeconfig = `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`
