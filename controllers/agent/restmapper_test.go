// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build integration

package agent

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

var _ = Describe("The agent's REST mappings", func() {
	It("are the apiserver's for every kind of its table", func() {
		httpClient, err := rest.HTTPClientFor(env.Config)
		Expect(err).NotTo(HaveOccurred())
		discovered, err := apiutil.NewDynamicRESTMapper(env.Config, httpClient)
		Expect(err).NotTo(HaveOccurred())
		mapper, err := NodeRESTMapper(env.Config, httpClient)
		Expect(err).NotTo(HaveOccurred())
		known := mapper.(knownFirst).known
		for gvk := range agentKinds {
			want, err := discovered.RESTMapping(gvk.GroupKind(), gvk.Version)
			Expect(err).NotTo(HaveOccurred(), "discovery of %s", gvk)
			got, err := known.RESTMapping(gvk.GroupKind(), gvk.Version)
			Expect(err).NotTo(HaveOccurred(), "the table's %s", gvk)
			Expect(got.Resource).To(Equal(want.Resource), "resource of %s", gvk)
			Expect(got.Scope.Name()).To(Equal(want.Scope.Name()), "scope of %s", gvk)
		}
	})
})
