// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

// Package sharedenv is one real kube-apiserver and etcd (envtest) per test binary, started
// by the first test or benchmark that needs it and stopped by the binary's TestMain: the
// integration tier of the packages that talk to an API server but run no manager.
package sharedenv

import (
	"fmt"
	"os"
	"sync"
	"testing"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/numapref/numapref/internal/testutil/testenv"
)

// Env is a lazily started envtest environment. The zero value starts a bare API server;
// set Environment's fields (CRDs) before the first Start.
type Env struct {
	Environment envtest.Environment

	once    sync.Once
	cfg     *rest.Config
	err     error
	started bool
}

// Start returns an admin config (a copy the caller may change) and client of the API
// server, starting it on the first call. Without the envtest binaries it skips as
// testenv.RequireEnvtest does.
func (e *Env) Start(t testing.TB) (*rest.Config, kubernetes.Interface) {
	t.Helper()
	testenv.RequireEnvtest(t)
	e.once.Do(func() {
		e.started = true
		e.cfg, e.err = e.Environment.Start()
	})
	if e.err != nil {
		t.Fatalf("starting envtest: %v", e.err)
	}
	cs, err := kubernetes.NewForConfig(e.cfg)
	if err != nil {
		t.Fatalf("a client of envtest: %v", err)
	}
	return rest.CopyConfig(e.cfg), cs
}

// Main runs the tests and stops the API server if one started: call it from TestMain.
func (e *Env) Main(m *testing.M) {
	code := m.Run()
	if e.started {
		if err := e.Environment.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping envtest:", err)
		}
	}
	os.Exit(code)
}
