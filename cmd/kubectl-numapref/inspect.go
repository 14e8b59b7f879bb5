// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/url"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/numapref/numapref/internal/inspect"
)

// Defaults that match how the chart and config/ deploy the agent.
const (
	defaultAgentNamespace = "numapref-system"
	// defaultAgentSelector is the part of the chart's selector labels
	// (numapref.selectorLabels) that does not depend on the release, which the kustomize
	// DaemonSet carries too.
	defaultAgentSelector = "app.kubernetes.io/name=numapref,app.kubernetes.io/component=agent"
	defaultAgentPort     = 8443
	metricsPortName      = "metrics"
)

type inspectOptions struct {
	commonOptions

	agentURL       string
	agentNamespace string
	agentSelector  string
	agentPort      int

	insecure   bool
	caFile     string
	serverName string
	node       string // the node of the pod asked about (not a flag)

	tokenServiceAccount string
}

func (o *inspectOptions) register(fs *flag.FlagSet) {
	o.commonOptions.register(fs, "pod", "timeout of each request (API server and agent)")
	fs.StringVar(&o.agentURL, "agent-url", "", "the agent's base URL (https://host:port); skips discovery through the API server")
	fs.StringVar(&o.agentNamespace, "agent-namespace", defaultAgentNamespace, "namespace of the numapref agent pods")
	fs.StringVar(&o.agentSelector, "agent-selector", defaultAgentSelector, "label selector of the numapref agent pods")
	fs.IntVar(&o.agentPort, "agent-port", 0, fmt.Sprintf("the agent's metrics port (default: the agent pod's container port named %q, else %d)", metricsPortName, defaultAgentPort))
	fs.BoolVar(&o.insecure, "insecure-skip-tls-verify", false,
		"do not verify the agent's serving certificate: an escape hatch. The token for the agent is sent to whatever answers at the agent's address, "+
			"and anyone who can intercept node traffic can use it against the agents (not the API server: it is bound to the audience "+inspect.Audience+")")
	fs.StringVar(&o.caFile, "agent-ca-file", "", "PEM CA bundle that signed the agent's serving certificate (default: the ConfigMap "+inspect.CAConfigMap+" in --agent-namespace)")
	fs.StringVar(&o.serverName, "tls-server-name", "", "name the agent's certificate must carry (default: the ConfigMap's "+inspect.CAConfigMapNameKey+
		"; with --agent-ca-file, the host of the agent URL)")
	fs.StringVar(&o.tokenServiceAccount, "token-service-account", "", "<namespace>/<name>: send a token of this service account (TokenRequest, audience "+inspect.Audience+
		"); needed when your kubeconfig user is not a service account (default: your own service account, or a kubeconfig token of that audience)")
}

const inspectUsage = `usage: kubectl numapref inspect <namespace>/<pod> [flags]
       kubectl numapref inspect <pod> -n <namespace> [flags]

Shows a pod as the numapref agent on its node sees it. In the table, FORCED is the task's
forced preferred node as the agent's kernel backend reports it, EFFECTIVE the kernel's
numa_preferred_nid (/proc/<tid>/sched), DESIRED the node the agent wants; "none" is -1
(no node), "?" a value that could not be read, "-" nothing desired. A "*" after a TID
marks a task the agent's last pass has not seen yet.

The agent's certificate is verified with the CA the chart publishes in the ConfigMap
numapref-agent-ca of the agent namespace, for the name written there (every agent serves
it, whichever node IP is dialled). The agent accepts only tokens for the audience
numapref-agent, never your kubeconfig's own: the plugin asks the API server for one
(TokenRequest) for your service account, or for the one of --token-service-account when
you are not one (OIDC, certificates), and sends nothing else. The agent then checks that
the token's user may get the pod (SubjectAccessReview in the pod's namespace).

flags:
`

func runInspect(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var o inspectOptions
	fs := flag.NewFlagSet("inspect", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, inspectUsage)
		fs.PrintDefaults()
	}
	o.register(fs)
	arg, err := o.argument(fs, args, "inspect", "pod")
	if err != nil {
		return err
	}
	if err := o.validate(); err != nil {
		return err
	}
	cfg, ns, name, err := o.target(arg)
	if err != nil {
		return err
	}

	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("making API client: %w", err)
	}
	base, err := o.agentBase(ctx, cs, ns, name)
	if err != nil {
		return err
	}
	trust, err := resolveTrust(ctx, cs, &o)
	if err != nil {
		return err
	}
	if trust.perNode && trust.node == "" {
		// --agent-url skipped discovery: the pod's node is what the certificate must name.
		pod, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("getting pod %s/%s for the node its agent's certificate must name: %w", ns, name, err)
		}
		trust.node = pod.Spec.NodeName
	}
	token, source, err := agentToken(ctx, cfg, cs, o.tokenServiceAccount)
	if err != nil {
		return err
	}
	pod, err := fetchInspection(ctx, agentClient(cfg, trust, o.timeout), trust, base, token, source, ns, name)
	if err != nil {
		return err
	}
	if o.output == "json" {
		return printJSON(stdout, pod)
	}
	return printTable(stdout, pod)
}

// agentBase is the URL of the agent that answers for pod ns/name: --agent-url, or the one
// discovered on the pod's node, whose name it records in o.node.
func (o *inspectOptions) agentBase(ctx context.Context, cs kubernetes.Interface, ns, name string) (string, error) {
	if o.agentURL != "" {
		return o.agentURL, nil
	}
	t, err := discoverAgent(ctx, cs, ns, name, discovery{namespace: o.agentNamespace, selector: o.agentSelector, port: o.agentPort})
	if err != nil {
		return "", err
	}
	o.node = t.node
	return t.url, nil
}

func (o *inspectOptions) validate() error {
	if o.insecure && (o.caFile != "" || o.serverName != "") {
		return usageError("--insecure-skip-tls-verify excludes --agent-ca-file and --tls-server-name")
	}
	if o.tokenServiceAccount != "" {
		if _, _, err := splitServiceAccount(o.tokenServiceAccount); err != nil {
			return err
		}
	}
	if o.agentPort < 0 || o.agentPort > 65535 {
		return usageError("--agent-port %d is not a port", o.agentPort)
	}
	if o.agentURL != "" {
		u, err := url.Parse(o.agentURL)
		if err != nil || u.Scheme != "https" || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
			return usageError("--agent-url %q: want https://host:port (the agent only serves inspect over HTTPS; the token never goes in clear text)", o.agentURL)
		}
	}
	return nil
}

// podArg splits "<namespace>/<pod>", or takes a bare pod name in flagNS or, without it,
// the kubeconfig context's namespace; both names are checked as the agent checks them.
func podArg(arg, flagNS string, contextNS func() (string, error)) (string, string, error) {
	ns, name, found := strings.Cut(arg, "/")
	if !found {
		ns, name = flagNS, arg
		if ns == "" {
			var err error
			if ns, err = contextNS(); err != nil {
				return "", "", fmt.Errorf("reading the context's namespace: %w", err)
			}
		}
	} else if flagNS != "" && flagNS != ns {
		return "", "", usageError("the argument names namespace %q but --namespace is %q", ns, flagNS)
	}
	if _, _, err := inspect.ParsePath(inspect.Path(ns, name)); err != nil {
		return "", "", usageError("%q: %v", arg, err)
	}
	return ns, name, nil
}

// parseInterleaved parses flags that may come before and after positional arguments, as
// kubectl's own commands allow ("inspect ns/pod -o json"). Everything after "--" is
// positional.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}
