// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package main

import (
	"time"

	"github.com/numapref/numapref/internal/testutil/hostlab"
)

// storm runs a fork storm (hostlab.StartStorm) at rate forks per second for d, with during
// (if not nil) run beside it, and returns how many forks it made.
func storm(rate int, d time.Duration, execChildren bool, during func()) (int, error) {
	s, err := hostlab.StartStorm(rate, d, execChildren)
	if err != nil {
		return 0, err
	}
	done := make(chan struct{})
	if during != nil {
		go func() { during(); close(done) }()
	} else {
		close(done)
	}
	forks, err := s.Wait()
	<-done
	return forks, err
}
