// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

// Command kubectl-numapref is a kubectl plugin for numapref:
//
//	kubectl numapref status <namespace>/<name> [flags]
//
// shows a NumaPreference with every node that has problems, from the NumaNodeReports, and
//
//	kubectl numapref inspect <namespace>/<pod> [flags]
//
// shows one pod the way the numapref agent on its node sees it: each container's cgroup,
// cpuset and desired NUMA node, and each task's forced and effective preferred node. It
// finds the pod's node and the agent pod on that node through the API server, then asks
// the agent's inspect endpoint (GET /inspect/<namespace>/<pod> on its metrics port)
// directly. It verifies the agent's certificate with the CA and the name the chart
// publishes in the ConfigMap numapref-agent-ca of the agent namespace, and sends a token
// bound to the audience numapref-agent (TokenRequest for the user's own service account,
// or for --token-service-account), never the kubeconfig's own token. The agent reviews the
// token for that audience (TokenReview), authorizes get on the non-resource URL
// /inspect/<namespace>/<pod> (bind the chart's <release>-numapref-inspect-reader
// ClusterRole, or numapref-inspect-reader from config/rbac/inspect-reader-role.yaml) and
// get on the pod in its namespace (SubjectAccessReviews).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run is the whole plugin; it returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	commands := map[string]func(context.Context, []string, io.Writer, io.Writer) error{
		"inspect": runInspect,
		"status":  runStatus,
		"version": func(_ context.Context, _ []string, stdout, _ io.Writer) error {
			_, err := fmt.Fprintln(stdout, version)
			return err
		},
	}
	switch cmd := commands[args[0]]; {
	case cmd != nil:
		err := cmd(ctx, args[1:], stdout, stderr)
		switch {
		case errors.Is(err, flag.ErrHelp):
			return 0
		case errors.Is(err, errUsage):
			fmt.Fprintln(stderr, "kubectl-numapref:", err)
			return 2
		case err != nil:
			fmt.Fprintln(stderr, "kubectl-numapref:", err)
			return 1
		}
		return 0
	case slices.Contains([]string{"-h", "-help", "--help", "help"}, args[0]):
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "kubectl-numapref: unknown command %q\n%s", args[0], usage)
		return 2
	}
}

const usage = `usage: kubectl numapref <command> [flags]

commands:
  inspect <namespace>/<pod>    show a pod as the numapref agent on its node sees it
  status <namespace>/<name>    show a NumaPreference and the nodes with problems, and why
  version                      the plugin's version

Run "kubectl numapref <command> -h" for its flags.
`

// version is the plugin's release, set at build time (hack/plugin-archive.sh: -X
// main.version=v<semver>).
var version = "dev"

// errUsage marks errors in how the plugin was called (exit code 2).
var errUsage = errors.New("usage")

func usageError(format string, a ...any) error {
	return fmt.Errorf("%w: %s", errUsage, fmt.Sprintf(format, a...))
}
