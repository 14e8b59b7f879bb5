// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package mempolicy

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/numapref/numapref/internal/numa"
)

// ErrTruncated means a policy string as long as the kernel's buffer for it: numa_maps
// formats each mapping's policy into 64 bytes (show_numa_map in fs/proc/task_mmu.c), so a
// long node list is cut. The policy parsed from it may lack nodes.
var ErrTruncated = errors.New("policy string may be truncated by the kernel")

// ErrNoMappings means a numa_maps with no mapping: a kernel thread, or a process that is
// exiting. It has no memory policy to read.
var ErrNoMappings = errors.New("no mappings in numa_maps")

// maxPolicyString is the longest policy string numa_maps prints: its buffer less the NUL.
const maxPolicyString = 63

// Parse parses a policy as mpol_to_str prints it (Policy.String): "default", "local",
// "prefer:1", "prefer (many)=balancing:0-1", "bind=static:0", "interleave=relative:0-3",
// "weighted interleave:0,2". A string of the kernel's full length parses to the nodes it
// still holds whole, and the error wraps ErrTruncated.
func Parse(s string) (Policy, error) {
	p, rest, err := parsePrefix(s)
	if err != nil && !errors.Is(err, ErrTruncated) {
		return Policy{}, err
	}
	if rest != "" {
		return Policy{}, fmt.Errorf("memory policy %q: unexpected %q", s, rest)
	}
	return p, err
}

// parsePrefix parses the policy at the start of s, up to the first space after its mode
// name (mode names themselves may hold one), and returns the rest from that space on. A
// policy of the kernel's full length may end in a cut node list: the nodes before the last
// comma are kept, and the error wraps ErrTruncated.
func parsePrefix(s string) (Policy, string, error) {
	var p Policy
	rest, found := "", false
	for _, k := range kernelModeNames {
		if after, ok := strings.CutPrefix(s, k.name); ok {
			p.Mode, rest, found = k.mode, after, true
			break
		}
	}
	if !found {
		return Policy{}, "", fmt.Errorf("memory policy %q: unknown mode", s)
	}
	token, tail := rest, ""
	if i := strings.IndexByte(rest, ' '); i >= 0 {
		token, tail = rest[:i], rest[i:]
	}
	cut := len(s)-len(tail) >= maxPolicyString
	if after, ok := strings.CutPrefix(token, "="); ok {
		flags, nodes, hasNodes := strings.Cut(after, ":")
		f, err := parseFlags(flags)
		if err != nil {
			return Policy{}, "", fmt.Errorf("memory policy %q: %w", s, err)
		}
		p.Flags, token = f, ""
		if hasNodes {
			token = ":" + nodes
		}
	}
	if list, ok := strings.CutPrefix(token, ":"); ok {
		ids, err := numa.ParseList(list)
		if err != nil && cut {
			if i := strings.LastIndexByte(list, ','); i > 0 {
				ids, err = numa.ParseList(list[:i])
			}
		}
		if err != nil || len(ids) == 0 {
			return Policy{}, "", fmt.Errorf("memory policy %q: invalid nodes %q", s, list)
		}
		p.Nodes = numa.NewNodeMask(ids...)
		token = ""
	}
	if token != "" {
		return Policy{}, "", fmt.Errorf("memory policy %q: unexpected %q after the mode", s, token)
	}
	hasNodes := len(p.Nodes.IDs()) > 0
	switch {
	case (p.Mode == ModeDefault || p.Mode == ModeLocal) && (p.Flags != 0 || hasNodes):
		return Policy{}, "", fmt.Errorf("memory policy %q: %s has no nodes or flags", s, p.Mode)
	case p.Mode != ModeDefault && p.Mode != ModeLocal && !hasNodes:
		return Policy{}, "", fmt.Errorf("memory policy %q: %s without nodes", s, p.Mode)
	case cut:
		return p, tail, fmt.Errorf("memory policy %q: %w", s[:len(s)-len(tail)], ErrTruncated)
	}
	return p, tail, nil
}

// parseFlags parses the flags mpol_to_str prints: "static", "relative", "balancing",
// "static|balancing" or "relative|balancing".
func parseFlags(s string) (Flags, error) {
	switch s {
	case "static":
		return FlagStaticNodes, nil
	case "relative":
		return FlagRelativeNodes, nil
	case "balancing":
		return FlagNumaBalancing, nil
	case "static|balancing":
		return FlagStaticNodes | FlagNumaBalancing, nil
	case "relative|balancing":
		return FlagRelativeNodes | FlagNumaBalancing, nil
	}
	return 0, fmt.Errorf("invalid flags %q", s)
}

// mappingPolicy is one numa_maps line's policy and whether the mapping is one a program
// is least likely to have given a policy of its own (a file or the initial stack).
type mappingPolicy struct {
	policy Policy
	plain  bool
}

// parseNumaMapsLine reads the policy of one numa_maps line:
//
//	55d0c1a00000 prefer (many)=balancing:0 file=/usr/bin/app mapped=3 N0=3 kernelpagesize_kB=4
func parseNumaMapsLine(line string) (mappingPolicy, error) {
	addr, rest, ok := strings.Cut(strings.TrimRight(line, "\n"), " ")
	if !ok {
		return mappingPolicy{}, fmt.Errorf("numa_maps line %q: no policy", line)
	}
	if _, err := strconv.ParseUint(addr, 16, 64); err != nil {
		return mappingPolicy{}, fmt.Errorf("numa_maps line %q: address %q is not hex", line, addr)
	}
	p, tail, err := parsePrefix(rest)
	if err != nil {
		return mappingPolicy{}, fmt.Errorf("numa_maps line %q: %w", line, err)
	}
	plain := false
	for f := range strings.FieldsSeq(tail) {
		if f == "stack" || strings.HasPrefix(f, "file=") {
			plain = true
		}
	}
	return mappingPolicy{policy: p, plain: plain}, nil
}

// TaskPolicy is the task policy that the text of a /proc/<pid>/numa_maps shows. Each line
// shows the policy of one mapping: the mapping's own (mbind, a shared memory policy) or,
// for the mappings without one, the task's. The task's is therefore the policy most lines
// show; the lines of files and of the initial stack, which programs rarely give a policy,
// decide it when there are any, the others only when there are none. A tie goes to the
// policy seen first. Lines whose policy the kernel cut (ErrTruncated) are left out. Text
// with no line gives ErrNoMappings.
func TaskPolicy(text string) (Policy, error) {
	type tally struct {
		policy       Policy
		plain, other int
	}
	var seen []tally
	truncated := 0
	for line := range strings.Lines(text) {
		if strings.TrimSpace(line) == "" {
			continue
		}
		m, err := parseNumaMapsLine(line)
		if errors.Is(err, ErrTruncated) {
			truncated++ // a policy of many nodes: not one numapref sets, and not whole
			continue
		}
		if err != nil {
			return Policy{}, err
		}
		i := 0
		for i < len(seen) && !seen[i].policy.Equal(m.policy) {
			i++
		}
		if i == len(seen) {
			seen = append(seen, tally{policy: m.policy})
		}
		if m.plain {
			seen[i].plain++
		} else {
			seen[i].other++
		}
	}
	if len(seen) == 0 && truncated > 0 {
		return Policy{}, fmt.Errorf("every mapping's policy: %w", ErrTruncated)
	}
	if len(seen) == 0 {
		return Policy{}, ErrNoMappings
	}
	best := 0
	for i, s := range seen {
		b := seen[best]
		if s.plain > b.plain || (s.plain == b.plain && b.plain == 0 && s.other > b.other) {
			best = i
		}
	}
	return seen[best].policy, nil
}
