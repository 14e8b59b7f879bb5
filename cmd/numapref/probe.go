// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"flag"
	"path/filepath"

	"github.com/numapref/numapref/internal/numa/prctl"
)

func runProbe(args []string) error {
	fs := flag.NewFlagSet("probe", flag.ContinueOnError)
	hostRoot := fs.String("host-root", "/", "where the host's /proc and /sys are mounted")
	option := fs.Int("prctl-option", prctl.DefaultOption, "the PR_PREFERRED_NID option number of the patch this fleet runs")
	if err := fs.Parse(args); err != nil {
		return err
	}
	return printJSON(prctl.Probe(probeOptions(*hostRoot, *option)))
}

func probeOptions(hostRoot string, option int) prctl.ProbeOptions {
	return prctl.ProbeOptions{
		ProcRoot:    filepath.Join(hostRoot, "proc"),
		SysRoot:     filepath.Join(hostRoot, "sys"),
		DebugfsRoot: filepath.Join(hostRoot, "sys/kernel/debug"),
		Option:      option,
	}
}
