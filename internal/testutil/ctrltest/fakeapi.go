// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

// Package ctrltest is what the controllers' tests share: a fake API for unit tests, and for
// the envtest suites of controllers/agent, controllers/summarizer and controllers/agentcert
// one real kube-apiserver and etcd per suite (Start), with a direct client for assertions,
// managers run in a goroutine (RunManager) and the objects every suite makes.
package ctrltest

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoapplyconfigurations "k8s.io/client-go/applyconfigurations"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	numaapply "github.com/numapref/numapref/api/v1alpha1/applyconfiguration"
)

// NewScheme is the scheme of the APIs numapref uses: client-go's and numa.numapref.io.
func NewScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := numav1.AddToScheme(s); err != nil {
		return nil, err
	}
	return s, nil
}

// FakeAPI is a fake client holding objs, which applies with the apply configurations' own
// schemas (client-go's and this API's), as the apiserver does.
func FakeAPI(t testing.TB, objs ...client.Object) client.Client {
	t.Helper()
	s, err := NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	return fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).
		WithTypeConverters(clientgoapplyconfigurations.NewTypeConverter(clientgoscheme.Scheme), numaapply.NewTypeConverter(s)).
		Build()
}

// Condition is p's condition of type typ, or a zero one.
func Condition(p *numav1.NumaPreference, typ string) metav1.Condition {
	for _, c := range p.Status.Conditions {
		if c.Type == typ {
			return c
		}
	}
	return metav1.Condition{}
}
