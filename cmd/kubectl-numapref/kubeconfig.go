// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// loadKubeconfig reads the kubeconfig as kubectl does ($KUBECONFIG, else ~/.kube/config,
// or --kubeconfig) with kubectl's overrides (--context, --cluster, --user, --server, --as,
// --as-group), and returns the client config and the loader (for the context's namespace).
func (o *commonOptions) loadKubeconfig() (*rest.Config, clientcmd.ClientConfig, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = o.kubeconfig
	overrides := &clientcmd.ConfigOverrides{CurrentContext: o.kubeContext}
	overrides.Context.Cluster, overrides.Context.AuthInfo = o.cluster, o.user
	overrides.ClusterInfo.Server = o.server
	overrides.AuthInfo.Impersonate, overrides.AuthInfo.ImpersonateGroups = o.as, o.asGroups
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides)
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, nil, fmt.Errorf("loading kubeconfig: %w", err)
	}
	cfg.Timeout = o.timeout
	return cfg, cc, nil
}

// stringList is a flag that may be given more than once.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

// commonOptions are the flags every command has: which cluster, which namespace, what output.
type commonOptions struct {
	kubeconfig  string
	kubeContext string
	// kubectl's overrides of the kubeconfig.
	cluster, user, server, as string
	asGroups                  stringList
	namespace                 string
	output                    string
	timeout                   time.Duration
}

// register adds the common flags; object names what a bare argument names ("pod").
func (o *commonOptions) register(fs *flag.FlagSet, object, timeoutHelp string) {
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, else ~/.kube/config)")
	fs.StringVar(&o.kubeContext, "context", "", "kubeconfig context (default: the current context)")
	fs.StringVar(&o.cluster, "cluster", "", "kubeconfig cluster (default: the context's)")
	fs.StringVar(&o.user, "user", "", "kubeconfig user (default: the context's)")
	fs.StringVar(&o.server, "server", "", "the API server's address (default: the cluster's)")
	fs.StringVar(&o.as, "as", "", "user to impersonate for every request to the API server, as kubectl --as")
	fs.Var(&o.asGroups, "as-group", "group to impersonate, as kubectl --as-group (repeatable)")
	fs.StringVar(&o.namespace, "namespace", "", "the "+object+"'s namespace when the argument is a bare name (default: the context's)")
	fs.StringVar(&o.namespace, "n", "", "shorthand for --namespace")
	fs.StringVar(&o.output, "output", "table", "output format: table or json")
	fs.StringVar(&o.output, "o", "table", "shorthand for --output")
	fs.DurationVar(&o.timeout, "request-timeout", 30*time.Second, timeoutHelp)
}

// argument parses args (flags before and after it) and returns the one argument,
// "<namespace>/<object>" or a bare name, of command cmd.
func (o *commonOptions) argument(fs *flag.FlagSet, args []string, cmd, object string) (string, error) {
	pos, err := parseInterleaved(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		return "", err
	}
	if err != nil {
		return "", usageError("%v", err)
	}
	if len(pos) != 1 {
		return "", usageError("%s takes one argument, <namespace>/<%s>, got %d", cmd, object, len(pos))
	}
	if o.output != "table" && o.output != "json" {
		return "", usageError("--output must be table or json, not %q", o.output)
	}
	return pos[0], nil
}

// target loads the kubeconfig and splits the argument into namespace and name.
func (o *commonOptions) target(arg string) (*rest.Config, string, string, error) {
	cfg, cc, err := o.loadKubeconfig()
	if err != nil {
		return nil, "", "", err
	}
	ns, name, err := podArg(arg, o.namespace, func() (string, error) {
		ns, _, err := cc.Namespace()
		return ns, err
	})
	return cfg, ns, name, err
}
