// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

// Command numapref is the numapref node agent and its node tools:
//
//	numapref agent   the DaemonSet's agent (controllers + apply engine)
//	numapref summarizer   the summarizer Deployment: adds up the node reports into each
//	                 NumaPreference's status (one elected replica at a time)
//	numapref signer  the signer Deployment: the agents' CA (kept in a Secret only it
//	                 reads), their node certificates, the CA ConfigMap, the scraper's token
//	numapref probe   this node's kernel NUMA facts as JSON
//	numapref tasks   how the agent sees one container: cgroup, cpuset, tasks, as JSON
//	numapref tune-balancing   set kernel.numa_balancing and the scan knobs (the chart's
//	                 opt-in, privileged init container; the agent never writes them)
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "agent":
		err = runAgent(os.Args[2:])
	case "summarizer":
		err = runSummarizer(os.Args[2:])
	case "signer":
		err = runSigner(os.Args[2:])
	case "uninstall-check":
		err = runUninstallCheck(os.Args[2:])
	case "probe":
		err = runProbe(os.Args[2:])
	case "tasks":
		err = runTasks(os.Args[2:])
	case "tune-balancing":
		err = runTuneBalancing(os.Args[2:])
	case "flags-markdown": // docs/reference/flags.md (make generate); not in usage
		err = printFlagsMarkdown(os.Stdout)
	case "-h", "-help", "--help", "help":
		usage()
		return
	default:
		fmt.Fprintf(os.Stderr, "numapref: unknown command %q\n", os.Args[1])
		usage()
		os.Exit(2)
	}
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "numapref:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprint(os.Stderr, `usage: numapref <command> [flags]

commands:
  agent   run the node agent (DaemonSet)
  summarizer   add up the node reports into each NumaPreference's status (Deployment)
  signer  keep the agents' CA, sign their node certificates, renew the scraper's token (Deployment)
  uninstall-check   delete the agents' DaemonSet, wait for their drains, say which nodes keep values (helm's pre-delete hook)
  probe   print this node's kernel NUMA facts as JSON
  tasks   print how the agent sees one container (cgroup, cpuset, tasks) as JSON
  tune-balancing   set kernel.numa_balancing and NUMA balancing's scan knobs (validated
          first; nothing is written unless every value is valid)

Run "numapref <command> -h" for a command's flags.
`)
}

func printJSON(v any) error {
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
