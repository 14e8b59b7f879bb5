// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build chart

// Package chart renders charts/numapref with the pinned helm (hack/tools.sh) and checks what
// reaches the cluster: the DaemonSet's least-privilege posture, the agent flags derived from
// the values, RBAC identical to the controller-gen output, the CRD copy, and the values schema.
package chart

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/numapref/numapref/internal/testutil/testenv"
)

const (
	release   = "np"
	namespace = "numapref-system"
	chartDir  = "charts/numapref"
)

// repoRoot is the module root, two levels above this package.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, chartDir, "Chart.yaml")); err != nil {
		t.Fatalf("chart not found under %s: %v", root, err)
	}
	return root
}

// helmBinary is $HELM (make chart-test sets it to the pinned helm of hack/tools.sh), else
// helm on PATH. A missing helm fails under CI: a chart nobody rendered is not a tested chart.
func helmBinary(t *testing.T) string {
	t.Helper()
	return testenv.RequireHelm(t)
}

// helmTemplate runs `helm template` with the given values (as a YAML values file, so types
// are exact) and any extra flags, and returns stdout, stderr and the error.
func helmTemplate(t *testing.T, values map[string]any, extra ...string) (string, string, error) {
	t.Helper()
	return helmTemplateRelease(t, release, namespace, values, extra...)
}

// helmTemplateAs renders the chart with its default values as release name in namespace.
func helmTemplateAs(t *testing.T, name, namespace string) (string, string, error) {
	t.Helper()
	return helmTemplateRelease(t, name, namespace, nil)
}

func helmTemplateRelease(t *testing.T, name, namespace string, values map[string]any, extra ...string) (string, string, error) {
	t.Helper()
	root := repoRoot(t)
	args := append([]string{"template", name, filepath.Join(root, chartDir), "--namespace", namespace}, extra...)
	var stdin []byte
	if values != nil {
		var err error
		if stdin, err = yaml.Marshal(values); err != nil {
			t.Fatal(err)
		}
		// From stdin: helm splits --values on commas, and test names (temp dirs) have them.
		args = append(args, "--values", "-")
	}
	cmd := exec.Command(helmBinary(t), args...)
	cmd.Stdin = bytes.NewReader(stdin)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+t.TempDir(), "HELM_CONFIG_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}

// rendered is the chart's output, decoded strictly into typed objects by kind.
type rendered struct {
	raw                 string
	daemonSets          []appsv1.DaemonSet
	deployments         map[string]appsv1.Deployment
	pdbs                map[string]policyv1.PodDisruptionBudget
	serviceAccounts     []corev1.ServiceAccount
	clusterRoles        map[string]rbacv1.ClusterRole
	clusterRoleBindings map[string]rbacv1.ClusterRoleBinding
	roles               map[string]rbacv1.Role
	roleBindings        map[string]rbacv1.RoleBinding
	secrets             map[string]corev1.Secret
	configMaps          map[string]corev1.ConfigMap
	services            map[string]corev1.Service
	// other holds the kinds of other APIs (cert-manager's, admission policies) by
	// kind/name, decoded as maps.
	other map[string]map[string]any
	// hooks holds helm's hook resources (helm.sh/hook) by kind/name, as rendered: they
	// are no part of the release's resources above.
	hooks map[string][]byte
}

// clusterScoped are the kinds the chart renders without a namespace.
var clusterScoped = map[string]bool{
	"ClusterRole": true, "ClusterRoleBinding": true, "ValidatingAdmissionPolicy": true, "ValidatingAdmissionPolicyBinding": true,
}

func render(t *testing.T, values map[string]any, extra ...string) rendered {
	t.Helper()
	out, stderr, err := helmTemplate(t, values, extra...)
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, stderr)
	}
	r := rendered{
		raw:                 out,
		deployments:         map[string]appsv1.Deployment{},
		pdbs:                map[string]policyv1.PodDisruptionBudget{},
		clusterRoles:        map[string]rbacv1.ClusterRole{},
		clusterRoleBindings: map[string]rbacv1.ClusterRoleBinding{},
		roles:               map[string]rbacv1.Role{},
		roleBindings:        map[string]rbacv1.RoleBinding{},
		secrets:             map[string]corev1.Secret{},
		configMaps:          map[string]corev1.ConfigMap{},
		services:            map[string]corev1.Service{},
		other:               map[string]map[string]any{},
		hooks:               map[string][]byte{},
	}
	for _, doc := range documents(t, out) {
		var meta struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Metadata   struct {
				Name        string            `json:"name"`
				Namespace   string            `json:"namespace"`
				Annotations map[string]string `json:"annotations"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			t.Fatalf("decoding document: %v\n%s", err, doc)
		}
		if meta.Kind == "" {
			continue // a document of comments only
		}
		if namespaced := !clusterScoped[meta.Kind]; namespaced && meta.Metadata.Namespace != namespace {
			t.Errorf("%s %s: namespace %q, want the release namespace %q", meta.Kind, meta.Metadata.Name, meta.Metadata.Namespace, namespace)
		}
		if _, hook := meta.Metadata.Annotations["helm.sh/hook"]; hook {
			r.hooks[meta.Kind+"/"+meta.Metadata.Name] = doc
			continue
		}
		strict := func(into any) {
			t.Helper()
			if err := yaml.UnmarshalStrict(doc, into); err != nil {
				t.Fatalf("%s %s does not decode strictly: %v", meta.Kind, meta.Metadata.Name, err)
			}
		}
		switch meta.Kind {
		case "DaemonSet":
			var o appsv1.DaemonSet
			strict(&o)
			r.daemonSets = append(r.daemonSets, o)
		case "Deployment":
			var o appsv1.Deployment
			strict(&o)
			r.deployments[o.Name] = o
		case "PodDisruptionBudget":
			var o policyv1.PodDisruptionBudget
			strict(&o)
			r.pdbs[o.Name] = o
		case "ServiceAccount":
			var o corev1.ServiceAccount
			strict(&o)
			r.serviceAccounts = append(r.serviceAccounts, o)
		case "ClusterRole":
			var o rbacv1.ClusterRole
			strict(&o)
			r.clusterRoles[o.Name] = o
		case "ClusterRoleBinding":
			var o rbacv1.ClusterRoleBinding
			strict(&o)
			r.clusterRoleBindings[o.Name] = o
		case "Role":
			var o rbacv1.Role
			strict(&o)
			r.roles[o.Name] = o
		case "RoleBinding":
			var o rbacv1.RoleBinding
			strict(&o)
			r.roleBindings[o.Name] = o
		case "Secret":
			var o corev1.Secret
			strict(&o)
			r.secrets[o.Name] = o
		case "ConfigMap":
			var o corev1.ConfigMap
			strict(&o)
			r.configMaps[o.Name] = o
		case "Service":
			var o corev1.Service
			strict(&o)
			r.services[o.Name] = o
		case "Issuer", "Certificate", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding", "PodMonitor", "PrometheusRule", "ResourceQuota":
			var o map[string]any
			strict(&o)
			r.other[meta.Kind+"/"+meta.Metadata.Name] = o
		default:
			t.Errorf("unexpected kind %s (%s) in the chart output", meta.Kind, meta.Metadata.Name)
		}
	}
	return r
}

// documents splits helm's output into its YAML documents.
func documents(t *testing.T, out string) [][]byte {
	t.Helper()
	var docs [][]byte
	reader := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(out)))
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return docs
		}
		if err != nil {
			t.Fatalf("splitting helm output: %v", err)
		}
		docs = append(docs, doc)
	}
}

// generatedRules are the agent's rules as controller-gen wrote them: the ClusterRole's, and
// the Role's for its own namespace.
func generatedRules(t *testing.T) (cluster, namespaced []rbacv1.PolicyRule) {
	t.Helper()
	cluster, namespaced = readRoles(t, "config/rbac/role.yaml")
	if len(cluster) == 0 || len(namespaced) == 0 {
		t.Fatal("config/rbac/role.yaml lacks the ClusterRole's or the Role's rules")
	}
	return cluster, namespaced
}

// generatedSummarizerRules are the summarizer's, from cmd/numapref's markers.
func generatedSummarizerRules(t *testing.T) []rbacv1.PolicyRule {
	t.Helper()
	cluster, namespaced := readRoles(t, "config/rbac/summarizer/role.yaml")
	if len(cluster) == 0 || len(namespaced) != 0 {
		t.Fatal("config/rbac/summarizer/role.yaml: want a ClusterRole's rules only")
	}
	return cluster
}

// generatedSignerRules are the signer's, from controllers/agentcert's markers.
func generatedSignerRules(t *testing.T) []rbacv1.PolicyRule {
	t.Helper()
	cluster, namespaced := readRoles(t, "config/rbac/signer/role.yaml")
	if len(cluster) == 0 || len(namespaced) != 0 {
		t.Fatal("config/rbac/signer/role.yaml: want a ClusterRole's rules only")
	}
	return cluster
}

// readRoles reads the rules of the ClusterRole and the Role in a file controller-gen wrote.
func readRoles(t *testing.T, path string) (cluster, namespaced []rbacv1.PolicyRule) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), path))
	if err != nil {
		t.Fatal(err)
	}
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(b)))
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return cluster, namespaced
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		var role rbacv1.ClusterRole // a Role has the same fields
		if err := yaml.UnmarshalStrict(doc, &role); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		switch role.Kind {
		case "ClusterRole":
			cluster = role.Rules
		case "Role":
			namespaced = role.Rules
		default:
			t.Fatalf("%s: unexpected kind %q", path, role.Kind)
		}
	}
}

var privilegedTrue = regexp.MustCompile(`(?m)^\s*-?\s*privileged:\s*["']?true`)

func TestRender(t *testing.T) {
	fullname := release + "-numapref"
	commonTail := []string{
		"--cgroup-root=/host/sys/fs/cgroup",
		"--state-dir=/var/lib/numapref/" + namespace + "_" + release,
		"--adopt-state-from=/var/lib/numapref",
		"--emulator-state-dir=/run/numapref/emulator",
	}
	args := func(head []string, tail ...string) []string {
		out := append([]string{"agent"}, head...)
		out = append(out, commonTail...)
		return append(out, tail...)
	}
	tests := []struct {
		name        string
		values      map[string]any
		caps        []corev1.Capability
		hostNetwork bool
		args        []string
		ports       []corev1.ContainerPort
		metricsAuth bool
		sharedCert  bool // the chart's shared serving certificate, mounted (else each node's own, or none)
		// seccomp is the agent container's profile: RuntimeDefault ("" here) unless page
		// migration is on, as containerd's default profile denies move_pages.
		seccomp corev1.SeccompProfileType
	}{
		{
			name:        "defaults",
			caps:        []corev1.Capability{"SYS_PTRACE", "NET_ADMIN"},
			hostNetwork: true,
			args: args([]string{"--kernel=auto", "--prctl-option=78", "--rescan-interval=10s", "--max-tasks-per-container=32768", "--max-preferences-per-namespace=128", "--fork-events=true", "--nri-socket=/var/run/nri/nri.sock", "--nri-start-grace=2m", "--pod-resources-socket=/var/lib/kubelet/pod-resources/kubelet.sock", "--pod-resources-timeout=2s", "--kubelet-cgroup-root=/"},
				"--metrics-bind-address=[$(HOST_IP)]:8443", "--tls-node-certificate", "--tls-node-certificate-lifetime=168h", "--health-probe-bind-address=:8081",
				"--zap-log-level=info"),
			ports:       []corev1.ContainerPort{{Name: "metrics", ContainerPort: 8443}, {Name: "health", ContainerPort: 8081}},
			metricsAuth: true,
		},
		{
			name:        "no fork events, emulated kernel",
			values:      map[string]any{"forkEvents": false, "kernel": "emulated"},
			caps:        []corev1.Capability{"SYS_PTRACE"},
			hostNetwork: false,
			args: args([]string{"--kernel=emulated", "--prctl-option=78", "--rescan-interval=10s", "--max-tasks-per-container=32768", "--max-preferences-per-namespace=128", "--fork-events=false", "--nri-socket=/var/run/nri/nri.sock", "--nri-start-grace=2m", "--pod-resources-socket=/var/lib/kubelet/pod-resources/kubelet.sock", "--pod-resources-timeout=2s", "--kubelet-cgroup-root=/"},
				"--metrics-bind-address=:8443", "--tls-cert-dir=/etc/numapref/tls", "--health-probe-bind-address=:8081",
				"--zap-log-level=info"),
			ports:       []corev1.ContainerPort{{Name: "metrics", ContainerPort: 8443}, {Name: "health", ContainerPort: 8081}},
			metricsAuth: true,
			sharedCert:  true,
		},
		{
			name: "every flag value changed, metrics off",
			values: map[string]any{
				"kernel": "prctl", "prctlOption": 80, "rescanInterval": "1m30s", "maxTasksPerContainer": 8, "kubeletCgroupRoot": "/kubelet",
				"cgroupDriver": "systemd", "logLevel": "debug", "metrics": map[string]any{"enabled": false, "port": 9443},
				"healthProbe":   map[string]any{"port": 9081},
				"podResources":  map[string]any{"enabled": true, "socket": "/srv/kubelet/pod-resources/kubelet.sock", "timeout": "500ms"},
				"pageMigration": map[string]any{"enabled": true, "pagesPerSecond": 1000, "maxBusy": 0.5},
			},
			seccomp:     corev1.SeccompProfileTypeUnconfined,
			caps:        []corev1.Capability{"SYS_PTRACE", "NET_ADMIN"},
			hostNetwork: true,
			args: args([]string{"--kernel=prctl", "--prctl-option=80", "--rescan-interval=1m30s", "--max-tasks-per-container=8", "--max-preferences-per-namespace=128", "--fork-events=true", "--nri-socket=/var/run/nri/nri.sock", "--nri-start-grace=2m", "--page-migration-rate=1000", "--page-migration-max-busy=0.5", "--pod-resources-socket=/srv/kubelet/pod-resources/kubelet.sock", "--pod-resources-timeout=500ms", "--kubelet-cgroup-root=/kubelet", "--cgroup-driver=systemd"},
				"--metrics-bind-address=0", "--health-probe-bind-address=:9081",
				"--zap-log-level=debug"),
			ports:       []corev1.ContainerPort{{Name: "health", ContainerPort: 9081}},
			metricsAuth: false,
		},
		{
			name:        "metrics on another port, cgroupfs, verbosity",
			values:      map[string]any{"cgroupDriver": "cgroupfs", "logLevel": "3", "metrics": map[string]any{"enabled": true, "port": 9443}},
			caps:        []corev1.Capability{"SYS_PTRACE", "NET_ADMIN"},
			hostNetwork: true,
			args: args([]string{"--kernel=auto", "--prctl-option=78", "--rescan-interval=10s", "--max-tasks-per-container=32768", "--max-preferences-per-namespace=128", "--fork-events=true", "--nri-socket=/var/run/nri/nri.sock", "--nri-start-grace=2m", "--pod-resources-socket=/var/lib/kubelet/pod-resources/kubelet.sock", "--pod-resources-timeout=2s", "--kubelet-cgroup-root=/", "--cgroup-driver=cgroupfs"},
				"--metrics-bind-address=[$(HOST_IP)]:9443", "--tls-node-certificate", "--tls-node-certificate-lifetime=168h", "--health-probe-bind-address=:8081",
				"--zap-log-level=3"),
			ports:       []corev1.ContainerPort{{Name: "metrics", ContainerPort: 9443}, {Name: "health", ContainerPort: 8081}},
			metricsAuth: true,
		},
	}
	wantRules, wantNamespacedRules := generatedRules(t)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := render(t, tc.values)

			if privilegedTrue.MatchString(r.raw) {
				t.Errorf("privileged: true in the rendered chart")
			}

			// The DaemonSet and its security posture.
			if len(r.daemonSets) != 1 {
				t.Fatalf("%d DaemonSets, want 1", len(r.daemonSets))
			}
			ds := r.daemonSets[0]
			pod := ds.Spec.Template.Spec
			if !pod.HostPID {
				t.Error("hostPID is false: the prctl resolves pids in the caller's pid namespace")
			}
			if pod.HostNetwork != tc.hostNetwork {
				t.Errorf("hostNetwork = %v, want %v (only fork events need it)", pod.HostNetwork, tc.hostNetwork)
			}
			if pod.HostIPC {
				t.Error("hostIPC is set")
			}
			wantDNS := corev1.DNSPolicy("")
			if tc.hostNetwork {
				wantDNS = corev1.DNSClusterFirstWithHostNet
			}
			if pod.DNSPolicy != wantDNS {
				t.Errorf("dnsPolicy = %q, want %q", pod.DNSPolicy, wantDNS)
			}
			if pod.SecurityContext != nil && pod.SecurityContext.SeccompProfile != nil && pod.SecurityContext.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
				t.Errorf("pod seccomp profile %q overrides the container's", pod.SecurityContext.SeccompProfile.Type)
			}
			if len(pod.InitContainers) != 0 || len(pod.EphemeralContainers) != 0 {
				t.Error("unexpected init or ephemeral containers")
			}
			if len(pod.Containers) != 1 {
				t.Fatalf("%d containers, want 1", len(pod.Containers))
			}
			c := pod.Containers[0]
			sc := c.SecurityContext
			if sc == nil {
				t.Fatal("container has no securityContext")
			}
			if got := boolString(sc.Privileged); got != "false" {
				t.Errorf("privileged = %s, want explicitly false", got)
			}
			if got := boolString(sc.AllowPrivilegeEscalation); got != "false" {
				t.Errorf("allowPrivilegeEscalation = %s, want false", got)
			}
			if got := boolString(sc.ReadOnlyRootFilesystem); got != "true" {
				t.Errorf("readOnlyRootFilesystem = %s, want true", got)
			}
			wantSeccomp := tc.seccomp
			if wantSeccomp == "" {
				wantSeccomp = corev1.SeccompProfileTypeRuntimeDefault
			}
			if sc.SeccompProfile == nil || sc.SeccompProfile.Type != wantSeccomp {
				t.Errorf("seccompProfile = %+v, want %s", sc.SeccompProfile, wantSeccomp)
			}
			if sc.Capabilities == nil {
				t.Fatal("no capabilities section")
			}
			if diff := cmp.Diff([]corev1.Capability{"ALL"}, sc.Capabilities.Drop); diff != "" {
				t.Errorf("capabilities.drop (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.caps, sc.Capabilities.Add); diff != "" {
				t.Errorf("capabilities.add (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.args, c.Args); diff != "" {
				t.Errorf("agent args (-want +got):\n%s", diff)
			}
			if len(c.Command) != 0 {
				t.Errorf("command %q overrides the image entrypoint", c.Command)
			}
			if diff := cmp.Diff(tc.ports, c.Ports); diff != "" {
				t.Errorf("ports (-want +got):\n%s", diff)
			}
			wantEnv := []corev1.EnvVar{
				{Name: "NODE_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}},
				{Name: "POD_NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
				{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
				{Name: "HOST_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.hostIP"}}},
			}
			if diff := cmp.Diff(wantEnv, c.Env); diff != "" {
				t.Errorf("env (-want +got):\n%s", diff)
			}
			if c.Image != "ghcr.io/numapref/numapref:0.1.0" {
				t.Errorf("image = %q, want the appVersion tag", c.Image)
			}
			wantMounts := []corev1.VolumeMount{
				{Name: "cgroup", MountPath: "/host/sys/fs/cgroup", ReadOnly: true},
				{Name: "state", MountPath: "/var/lib/numapref"},
				{Name: "run", MountPath: "/run/numapref"},
				{Name: "nri", MountPath: "/var/run/nri", ReadOnly: true}, // nri.enabled by default (nri_test.go)
				// The kubelet's PodResources socket's directory, read-only (FollowDevices).
				{Name: "pod-resources", MountPath: podResourcesDir(tc.values), ReadOnly: true},
			}
			if tc.sharedCert {
				// The serving certificate, read-only (tls_test.go checks what is in it).
				wantMounts = append(wantMounts, corev1.VolumeMount{Name: "tls", MountPath: "/etc/numapref/tls", ReadOnly: true})
			}
			if diff := cmp.Diff(wantMounts, c.VolumeMounts); diff != "" {
				t.Errorf("volumeMounts (-want +got):\n%s", diff)
			}
			dir, orCreate := corev1.HostPathDirectory, corev1.HostPathDirectoryOrCreate
			wantVolumes := []corev1.Volume{
				{Name: "cgroup", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/sys/fs/cgroup", Type: &dir}}},
				{Name: "state", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var/lib/numapref", Type: &orCreate}}},
				{Name: "run", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/run/numapref", Type: &orCreate}}},
				{Name: "nri", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var/run/nri", Type: &orCreate}}},
				{Name: "pod-resources", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: podResourcesDir(tc.values), Type: &orCreate}}},
			}
			if tc.sharedCert {
				wantVolumes = append(wantVolumes, corev1.Volume{Name: "tls", VolumeSource: corev1.VolumeSource{
					Secret: &corev1.SecretVolumeSource{SecretName: fullname + "-agent-tls", DefaultMode: ptr(int32(0o400))}}})
			}
			if diff := cmp.Diff(wantVolumes, pod.Volumes); diff != "" {
				t.Errorf("volumes (-want +got):\n%s", diff)
			}

			// The service accounts the DaemonSet and the summarizer run as, and every binding
			// pointing at them.
			summarizer := fullname + "-summarizer"
			wantSAs := []string{pod.ServiceAccountName, summarizer}
			if _, ok := r.deployments[fullname+"-signer"]; ok {
				wantSAs = []string{pod.ServiceAccountName, fullname + "-signer", summarizer}
			}
			if sa := names(r.serviceAccounts); !cmp.Equal(sa, wantSAs) {
				t.Fatalf("service accounts %v, want exactly the DaemonSet's %q, the summarizer's and, when it runs, the signer's", sa, pod.ServiceAccountName)
			}
			wantSubjects := []rbacv1.Subject{{Kind: "ServiceAccount", Name: pod.ServiceAccountName, Namespace: namespace}}
			summarizerSubjects := []rbacv1.Subject{{Kind: "ServiceAccount", Name: summarizer, Namespace: namespace}}

			// The agent ClusterRole: controller-gen's rules, nothing more.
			agentRole, ok := r.clusterRoles[fullname+"-agent"]
			if !ok {
				t.Fatalf("no ClusterRole %s-agent; have %v", fullname, keys(r.clusterRoles))
			}
			if diff := cmp.Diff(wantRules, agentRole.Rules); diff != "" {
				t.Errorf("agent ClusterRole rules differ from config/rbac/role.yaml (-want +got):\n%s", diff)
			}
			checkBinding(t, r.clusterRoleBindings, fullname+"-agent", rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: fullname + "-agent"}, wantSubjects)

			// Metrics auth, only with metrics.
			metricsRules := []rbacv1.PolicyRule{
				{APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"tokenreviews"}, Verbs: []string{"create"}},
				{APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"subjectaccessreviews"}, Verbs: []string{"create"}},
			}
			wantClusterRoles := map[string][]rbacv1.PolicyRule{fullname + "-agent": wantRules, summarizer: generatedSummarizerRules(t)}
			// The tenants' roles, aggregated into edit/admin and view, bound by nobody.
			wantClusterRoles[fullname+"-edit"] = []rbacv1.PolicyRule{{APIGroups: []string{"numa.numapref.io"}, Resources: []string{"numapreferences"},
				Verbs: []string{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}}}
			wantClusterRoles[fullname+"-view"] = []rbacv1.PolicyRule{{APIGroups: []string{"numa.numapref.io"}, Resources: []string{"numapreferences"},
				Verbs: []string{"get", "list", "watch"}}}
			checkBinding(t, r.clusterRoleBindings, summarizer, rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: summarizer}, summarizerSubjects)
			if tc.metricsAuth {
				wantClusterRoles[fullname+"-metrics-auth"] = metricsRules
				// For scrapers, bound by the cluster's admin, not by the chart.
				wantClusterRoles[fullname+"-metrics-reader"] = []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}
				wantClusterRoles[fullname+"-inspect-reader"] = []rbacv1.PolicyRule{{NonResourceURLs: []string{"/inspect/*"}, Verbs: []string{"get"}}}
				checkBinding(t, r.clusterRoleBindings, fullname+"-metrics-auth", rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: fullname + "-metrics-auth"}, wantSubjects)
			}
			gotClusterRoles := map[string][]rbacv1.PolicyRule{}
			for name, cr := range r.clusterRoles {
				gotClusterRoles[name] = cr.Rules
			}
			for name := range wantClusterRoles {
				_, bound := r.clusterRoleBindings[name]
				if forOthers := unboundRole(name); bound == forOthers {
					t.Errorf("ClusterRole %s bound: %t; the chart binds its own roles only, never a reader's or a tenant's", name, bound)
				}
			}
			// The signer, per-node certificates being the default with metrics.
			_, signerRuns := r.deployments[fullname+"-signer"]
			if signerRuns != (tc.metricsAuth && !tc.sharedCert) {
				t.Errorf("signer Deployment rendered: %v, want it exactly with metrics (per-node certificates)", signerRuns)
			}
			if signerRuns {
				signerSubjects := []rbacv1.Subject{{Kind: "ServiceAccount", Name: fullname + "-signer", Namespace: namespace}}
				wantClusterRoles[fullname+"-signer"] = generatedSignerRules(t)
				checkBinding(t, r.clusterRoleBindings, fullname+"-signer", rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: fullname + "-signer"}, signerSubjects)
			}
			if diff := cmp.Diff(wantClusterRoles, gotClusterRoles); diff != "" {
				t.Errorf("ClusterRoles (-want +got):\n%s", diff)
			}
			if len(r.clusterRoleBindings) != len(wantClusterRoles)-2*btoi(tc.metricsAuth)-2 {
				t.Errorf("ClusterRoleBindings %v for ClusterRoles %v", keys(r.clusterRoleBindings), keys(wantClusterRoles))
			}

			// Leader election, and the agent's own DaemonSet: Roles in the release namespace.
			wantRoles := map[string][]rbacv1.PolicyRule{
				fullname + "-agent": wantNamespacedRules,
				fullname + "-leader-election": {
					{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"create"}},
					{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, ResourceNames: []string{"numapref-summary"}, Verbs: []string{"get", "update"}},
					{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
				},
			}
			if signerRuns {
				// Its CA, the CA ConfigMap and its own ServiceAccount, by name.
				wantRoles[fullname+"-signer"] = []rbacv1.PolicyRule{
					{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{fullname + "-signer-ca"}, Verbs: []string{"get", "update"}},
					{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{"numapref-agent-ca"}, Verbs: []string{"get", "update"}},
					{APIGroups: []string{""}, Resources: []string{"secrets", "configmaps"}, Verbs: []string{"create"}},
					{APIGroups: []string{""}, Resources: []string{"serviceaccounts"}, ResourceNames: []string{fullname + "-signer"}, Verbs: []string{"get"}},
				}
				checkRoleBinding(t, r.roleBindings, fullname+"-signer", rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: fullname + "-signer"},
					[]rbacv1.Subject{{Kind: "ServiceAccount", Name: fullname + "-signer", Namespace: namespace}})
			}
			if tc.metricsAuth {
				// The CA ConfigMap, and nothing else, for every authenticated user.
				wantRoles[fullname+"-agent-ca-viewer"] = []rbacv1.PolicyRule{
					{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{"numapref-agent-ca"}, Verbs: []string{"get"}},
				}
				checkRoleBinding(t, r.roleBindings, fullname+"-agent-ca-viewer", rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: fullname + "-agent-ca-viewer"},
					[]rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "Group", Name: "system:authenticated"}})
			}
			gotRoles := map[string][]rbacv1.PolicyRule{}
			for name, role := range r.roles {
				gotRoles[name] = role.Rules
			}
			if diff := cmp.Diff(wantRoles, gotRoles); diff != "" {
				t.Errorf("Roles (-want +got):\n%s", diff)
			}
			if len(r.roleBindings) != len(wantRoles) {
				t.Errorf("RoleBindings %v, want one per Role %v", keys(r.roleBindings), keys(wantRoles))
			}
			checkRoleBinding(t, r.roleBindings, fullname+"-leader-election", rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: fullname + "-leader-election"}, summarizerSubjects)
			checkRoleBinding(t, r.roleBindings, fullname+"-agent", rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: fullname + "-agent"}, wantSubjects)
			for name, role := range r.roles {
				if role.Namespace != namespace {
					t.Errorf("Role %s in namespace %q, want the release's %q", name, role.Namespace, namespace)
				}
			}
		})
	}
}

// Every release has a state dir of its own on the host: two releases on the same nodes
// never share a ledger (each agent locks its dir, and would wait for the other for ever).
func TestStateDirPerRelease(t *testing.T) {
	dirs := map[string]string{}
	for _, rel := range []struct{ name, namespace string }{{"a", "one"}, {"b", "one"}, {"a", "two"}} {
		out, stderr, err := helmTemplateAs(t, rel.name, rel.namespace)
		if err != nil {
			t.Fatalf("helm template %s -n %s: %v\n%s", rel.name, rel.namespace, err, stderr)
		}
		var dir string
		for _, line := range strings.Split(out, "\n") {
			if _, v, ok := strings.Cut(strings.TrimSpace(line), `- "--state-dir=`); ok {
				dir = strings.TrimSuffix(v, `"`)
			}
		}
		want := "/var/lib/numapref/" + rel.namespace + "_" + rel.name
		if dir != want {
			t.Errorf("release %s/%s: --state-dir %q, want %q", rel.namespace, rel.name, dir, want)
		}
		if other, ok := dirs[dir]; ok {
			t.Errorf("releases %s and %s/%s share the state dir %s", other, rel.namespace, rel.name, dir)
		}
		dirs[dir] = rel.namespace + "/" + rel.name
	}
}

func checkBinding(t *testing.T, bindings map[string]rbacv1.ClusterRoleBinding, name string, ref rbacv1.RoleRef, subjects []rbacv1.Subject) {
	t.Helper()
	b, ok := bindings[name]
	if !ok {
		t.Errorf("no ClusterRoleBinding %s; have %v", name, keys(bindings))
		return
	}
	if diff := cmp.Diff(ref, b.RoleRef); diff != "" {
		t.Errorf("ClusterRoleBinding %s roleRef (-want +got):\n%s", name, diff)
	}
	if diff := cmp.Diff(subjects, b.Subjects); diff != "" {
		t.Errorf("ClusterRoleBinding %s subjects (-want +got):\n%s", name, diff)
	}
}

func checkRoleBinding(t *testing.T, bindings map[string]rbacv1.RoleBinding, name string, ref rbacv1.RoleRef, subjects []rbacv1.Subject) {
	t.Helper()
	b, ok := bindings[name]
	if !ok {
		t.Errorf("no RoleBinding %s; have %v", name, keys(bindings))
		return
	}
	if diff := cmp.Diff(ref, b.RoleRef); diff != "" {
		t.Errorf("RoleBinding %s roleRef (-want +got):\n%s", name, diff)
	}
	if diff := cmp.Diff(subjects, b.Subjects); diff != "" {
		t.Errorf("RoleBinding %s subjects (-want +got):\n%s", name, diff)
	}
}

func boolString(b *bool) string {
	if b == nil {
		return "unset"
	}
	return fmt.Sprint(*b)
}

// names lists the service accounts' names, sorted.
func names(sas []corev1.ServiceAccount) []string {
	var out []string
	for _, sa := range sas {
		out = append(out, sa.Name)
	}
	slices.Sort(out)
	return out
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// The schema is the chart's only input validation: helm template must refuse these.
func TestSchemaRejects(t *testing.T) {
	tests := []struct {
		name   string
		values map[string]any
		field  string // named in helm's error
	}{
		{"unknown kernel", map[string]any{"kernel": "foo"}, "kernel"},
		{"empty kernel", map[string]any{"kernel": ""}, "kernel"},
		{"prctlOption as string", map[string]any{"prctlOption": "78"}, "prctlOption"},
		{"prctlOption zero", map[string]any{"prctlOption": 0}, "prctlOption"},
		{"rescanInterval without unit", map[string]any{"rescanInterval": "10"}, "rescanInterval"},
		{"rescanInterval as number", map[string]any{"rescanInterval": 10}, "rescanInterval"},
		{"maxTasksPerContainer zero", map[string]any{"maxTasksPerContainer": 0}, "maxTasksPerContainer"},
		{"maxPreferencesPerNamespace negative", map[string]any{"maxPreferencesPerNamespace": -1}, "maxPreferencesPerNamespace"},
		{"forkEvents as string", map[string]any{"forkEvents": "yes"}, "forkEvents"},
		{"relative NRI socket", map[string]any{"nri": map[string]any{"enabled": true, "socket": "nri.sock"}}, "socket"},
		{"NRI socket at the root", map[string]any{"nri": map[string]any{"enabled": true, "socket": "/nri.sock"}}, "socket"},
		{"NRI start grace without unit", map[string]any{"nri": map[string]any{"enabled": true, "startGrace": "120"}}, "startGrace"},
		{"unknown cgroup driver", map[string]any{"cgroupDriver": "cgroupv2"}, "cgroupDriver"},
		{"relative kubelet cgroup root", map[string]any{"kubeletCgroupRoot": "kubelet"}, "kubeletCgroupRoot"},
		{"bad log level", map[string]any{"logLevel": "verbose"}, "logLevel"},
		{"metrics port out of range", map[string]any{"metrics": map[string]any{"enabled": true, "port": 70000}}, "port"},
		{"unknown pull policy", map[string]any{"image": map[string]any{"repository": "r", "pullPolicy": "Sometimes"}}, "pullPolicy"},
		{"misspelled key", map[string]any{"forkEvent": false}, "forkEvent"},
		{"certificate life as string", map[string]any{"tls": map[string]any{"validityDays": "365"}}, "validityDays"},
		{"renew before nothing", map[string]any{"tls": map[string]any{"renewBeforeDays": 0}}, "renewBeforeDays"},
		{"misspelled cert-manager key", map[string]any{"certManager": map[string]any{"enable": true}}, "enable"},
		{"cert-manager duration without unit", map[string]any{"certManager": map[string]any{"enabled": true, "duration": "90"}}, "duration"},
		{"audience switch as string", map[string]any{"metrics": map[string]any{"enabled": true, "port": 8443, "requireAgentAudience": "yes"}}, "requireAgentAudience"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, stderr, err := helmTemplate(t, tc.values)
			if err == nil {
				t.Fatalf("helm template accepted %v; rendered %d bytes", tc.values, len(out))
			}
			if !strings.Contains(stderr, "schema") || !strings.Contains(stderr, tc.field) {
				t.Errorf("helm template failed, but not on the schema for %s:\n%s", tc.field, stderr)
			}
		})
	}
}

// The chart's generated files are copies `make generate` writes; never edited by hand.
func TestGeneratedCopies(t *testing.T) {
	root := repoRoot(t)
	tests := []struct {
		name     string
		src, dst string // globs
	}{
		{"CRDs", "config/crd/bases/*.yaml", chartDir + "/crds/*"},
		{"agent ClusterRole", "config/rbac/role.yaml", chartDir + "/files/role.yaml"},
		{"summarizer ClusterRole", "config/rbac/summarizer/role.yaml", chartDir + "/files/summarizer-role.yaml"},
		{"signer ClusterRole", "config/rbac/signer/role.yaml", chartDir + "/files/signer-role.yaml"},
		{"node restriction policy", "config/rbac/node_restriction_policy.yaml", chartDir + "/files/node_restriction_policy.yaml"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src, dst := readGlob(t, root, tc.src), readGlob(t, root, tc.dst)
			if len(src) == 0 {
				t.Fatalf("nothing matches %s", tc.src)
			}
			if len(src) == 1 && len(dst) == 1 && !strings.ContainsRune(tc.src+tc.dst, '*') {
				// One file copied under another name: compare the contents.
				src, dst = map[string]string{"": slices.Collect(maps.Values(src))[0]}, map[string]string{"": slices.Collect(maps.Values(dst))[0]}
			}
			if diff := cmp.Diff(src, dst); diff != "" {
				t.Errorf("%s is not a copy of %s: run make generate (-want +got):\n%s", tc.dst, tc.src, diff)
			}
		})
	}
}

// readGlob maps base names to contents.
func readGlob(t *testing.T, root, glob string) map[string]string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(root, glob))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out[filepath.Base(p)] = string(b)
	}
	return out
}

func ptr[T any](v T) *T { return &v }

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// unboundRole tells the ClusterRoles the chart makes for others to bind, or to aggregate:
// the readers of /metrics and /inspect, and the tenants' edit and view.
func unboundRole(name string) bool {
	return strings.HasSuffix(name, "-reader") || strings.HasSuffix(name, "-edit") || strings.HasSuffix(name, "-view")
}

// The tenants' roles aggregate into Kubernetes' built-in ones, and tenantRoles=false
// leaves them out.
func TestTenantRoles(t *testing.T) {
	fullname := release + "-numapref"
	r := render(t, nil)
	for name, labels := range map[string][]string{
		fullname + "-edit": {"rbac.authorization.k8s.io/aggregate-to-edit", "rbac.authorization.k8s.io/aggregate-to-admin"},
		fullname + "-view": {"rbac.authorization.k8s.io/aggregate-to-view"},
	} {
		cr, ok := r.clusterRoles[name]
		if !ok {
			t.Fatalf("no ClusterRole %s; have %v", name, keys(r.clusterRoles))
		}
		for _, l := range labels {
			if cr.Labels[l] != "true" {
				t.Errorf("ClusterRole %s: label %s = %q, want \"true\"", name, l, cr.Labels[l])
			}
		}
		for _, rule := range cr.Rules {
			if slices.Contains(rule.Resources, "numapreferences/status") || slices.Contains(rule.Resources, "numanodereports") {
				t.Errorf("ClusterRole %s grants %v: the status is the summarizer's, the reports the agents'", name, rule.Resources)
			}
		}
	}
	off := render(t, map[string]any{"tenantRoles": false})
	for _, name := range []string{fullname + "-edit", fullname + "-view"} {
		if _, ok := off.clusterRoles[name]; ok {
			t.Errorf("tenantRoles=false: ClusterRole %s still rendered", name)
		}
	}
}

// podResourcesDir is the directory of the kubelet's PodResources socket values set, or the
// default's.
func podResourcesDir(values map[string]any) string {
	if pr, ok := values["podResources"].(map[string]any); ok {
		return filepath.Dir(pr["socket"].(string))
	}
	return "/var/lib/kubelet/pod-resources"
}

// podResources.enabled=false passes an empty socket, which the agent takes for none, and
// mounts nothing of the kubelet's.
func TestPodResourcesOff(t *testing.T) {
	r := render(t, map[string]any{"podResources": map[string]any{"enabled": false}})
	c := r.daemonSets[0].Spec.Template.Spec.Containers[0]
	if !slices.Contains(c.Args, "--pod-resources-socket=") || slices.ContainsFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, "--pod-resources-timeout") }) {
		t.Errorf("args %v: want --pod-resources-socket= and no timeout", c.Args)
	}
	for _, m := range c.VolumeMounts {
		if m.Name == "pod-resources" {
			t.Errorf("mount %+v with podResources off", m)
		}
	}
}
