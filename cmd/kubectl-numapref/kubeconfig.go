package main

import (
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
