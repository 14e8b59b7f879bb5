// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build !linux

package mempolicy

import "errors"

// errNotLinux is what the system calls give on other systems.
var errNotLinux = errors.New("memory policies: not supported on this operating system")

// Get has no memory policy to read on other systems.
func Get() (Policy, error) { return Policy{}, errNotLinux }

// Set has no memory policy to set on other systems.
func Set(Policy) error { return errNotLinux }

// Probe finds no memory policies on other systems.
func Probe() (Support, error) { return Support{Node: -1}, nil }
