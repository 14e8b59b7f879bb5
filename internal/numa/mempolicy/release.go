// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package mempolicy

import (
	"fmt"
	"strconv"
	"strings"
)

// SupportOfRelease is what a kernel of release (uname -r: "6.12.48+deb13-amd64") takes of
// the soft policies, by the version each came in: MPOL_PREFERRED always, MPOL_PREFERRED_MANY
// from 5.15, with MPOL_F_NUMA_BALANCING from 6.10. It stands in for Probe where the caller
// may not call get_mempolicy or set_mempolicy: containerd's and Docker's default seccomp
// profiles allow them only with CAP_SYS_NICE, which the agent does not hold. A kernel that
// backports a mode is counted by its version, so without it. node is the node the answer
// names (Support.Node).
func SupportOfRelease(release string, node int) (Support, error) {
	major, minor, err := kernelVersion(release)
	if err != nil {
		return Support{}, err
	}
	atLeast := func(ma, mi int) bool { return major > ma || major == ma && minor >= mi }
	return Support{Preferred: true, PreferredMany: atLeast(5, 15), PreferredManyBalancing: atLeast(6, 10), Node: node}, nil
}

// kernelVersion reads the major and minor version at the start of a kernel release.
func kernelVersion(release string) (major, minor int, err error) {
	parts := strings.SplitN(release, ".", 3)
	if len(parts) >= 2 {
		major, err = strconv.Atoi(parts[0])
		if err == nil {
			digits := parts[1]
			if i := strings.IndexFunc(parts[1], func(r rune) bool { return r < '0' || r > '9' }); i >= 0 {
				digits = parts[1][:i]
			}
			minor, err = strconv.Atoi(digits)
			if err == nil {
				return major, minor, nil
			}
		}
	}
	return 0, 0, fmt.Errorf("kernel release %q: no major.minor version", release)
}
