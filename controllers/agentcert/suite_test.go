// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build integration

package agentcert

import (
	"path/filepath"
	"testing"

	. "github.com/onsi/ginkgo/v2"

	"github.com/numapref/numapref/internal/testutil/ctrltest"
)

// These specs run the signer, and the requester against it, on a real kube-apiserver and
// etcd (envtest): the integration tier (build tag integration). Each runs with the rights
// its role's markers give it, impersonated, so that a spec fails when they do not suffice.

// env is the suite's API server; env.Client reads it directly, never a manager's cache.
var env *ctrltest.Env

func TestAgentCert(t *testing.T) { ctrltest.RunSpecs(t, "Agent Certificate Suite") }

var _ = BeforeSuite(func() { env = ctrltest.Start(filepath.Join("..", "..", "config", "crd", "bases")) })

var _ = AfterSuite(func() { env.Stop() })
