// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"flag"
	"fmt"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// loadKubeconfig reads the kubeconfig as kubectl does ($KUBECONFIG, else ~/.kube/config,
// or path) with the given context, and returns the client config and the loader (for the
// context's namespace).
func loadKubeconfig(path, context string, timeout time.Duration) (*rest.Config, clientcmd.ClientConfig, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = path
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: context})
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, nil, fmt.Errorf("loading kubeconfig: %w", err)
	}
	cfg.Timeout = timeout
	return cfg, cc, nil
}

// commonOptions are the flags every command has: which cluster, which namespace, what output.
type commonOptions struct {
	kubeconfig  string
	kubeContext string
	namespace   string
	output      string
	timeout     time.Duration
}

// register adds the common flags; object names what a bare argument names ("pod").
func (o *commonOptions) register(fs *flag.FlagSet, object, timeoutHelp string) {
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, else ~/.kube/config)")
	fs.StringVar(&o.kubeContext, "context", "", "kubeconfig context (default: the current context)")
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
	cfg, cc, err := loadKubeconfig(o.kubeconfig, o.kubeContext, o.timeout)
	if err != nil {
		return nil, "", "", err
	}
	ns, name, err := podArg(arg, o.namespace, func() (string, error) {
		ns, _, err := cc.Namespace()
		return ns, err
	})
	return cfg, ns, name, err
}
