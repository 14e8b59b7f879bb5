// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build integration

package main

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/numapref/numapref/internal/testutil/poll"
	"github.com/numapref/numapref/internal/testutil/sharedenv"
)

// A real kube-apiserver and etcd (envtest), started by the first test that needs them: the
// integration tier (build tag integration). The binaries come from hack/k8s-binaries.sh
// through KUBEBUILDER_ASSETS (make integration sets it).
var env = &sharedenv.Env{Environment: envtest.Environment{CRDDirectoryPaths: []string{filepath.Join("..", "..", "config", "crd", "bases")}, ErrorIfCRDPathMissing: true}}

func TestMain(m *testing.M) { env.Main(m) }

// apiServer returns an admin config and client of the shared envtest API server.
func apiServer(t *testing.T) (*rest.Config, kubernetes.Interface) {
	t.Helper()
	return env.Start(t)
}

func ensureNamespace(t *testing.T, cs kubernetes.Interface, name string) {
	t.Helper()
	_, err := cs.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// createPod creates a pod bound to node, then sets its status as a kubelet would.
func createPod(t *testing.T, cs kubernetes.Interface, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	ensureNamespace(t, cs, pod.Namespace)
	status := pod.Status
	created, err := cs.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	created.Status = status
	updated, err := cs.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, created, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return updated
}

// runningAgent is the status of a ready agent pod at hostIP.
func runningAgent(hostIP string) corev1.PodStatus {
	return corev1.PodStatus{Phase: corev1.PodRunning, HostIP: hostIP, PodIP: hostIP,
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
}

// agentPod is an agent pod as the chart makes it: host network, a port named metrics.
func agentPod(name, node string, port int32, status corev1.PodStatus) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: defaultAgentNamespace, Name: name, Labels: map[string]string{
			"app.kubernetes.io/name": "numapref", "app.kubernetes.io/instance": "np", "app.kubernetes.io/component": "agent"}},
		Spec: corev1.PodSpec{NodeName: node, HostNetwork: true, Containers: []corev1.Container{{
			Name: "agent", Image: "numapref:dev",
			Ports: []corev1.ContainerPort{{Name: "health", ContainerPort: 8081}, {Name: metricsPortName, ContainerPort: port}},
		}}},
		Status: status,
	}
}

// serviceAccountToken creates service account namespace/name and returns a token for it
// (TokenRequest), as a user's kubeconfig would hold.
func serviceAccountToken(t *testing.T, cs kubernetes.Interface, namespace, name string) string {
	t.Helper()
	ctx := context.Background()
	ensureNamespace(t, cs, namespace)
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	if _, err := cs.CoreV1().ServiceAccounts(namespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// bindClusterRole creates role (if new) and binds it to service account namespace/name.
func bindClusterRole(t *testing.T, cs kubernetes.Interface, role *rbacv1.ClusterRole, namespace, name string) {
	t.Helper()
	ctx := context.Background()
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name + "-" + namespace + "-" + name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: namespace, Name: name}},
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// eventually polls f until it returns nil or the deadline passes.
func eventually(t *testing.T, what string, f func() error) {
	t.Helper()
	poll.NoError(t, 30*time.Second, what, f)
}
