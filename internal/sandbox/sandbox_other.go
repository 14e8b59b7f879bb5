// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build !(linux && (amd64 || arm64))

package sandbox

import (
	"fmt"
	"runtime"
)

// Install is implemented for linux/amd64 and linux/arm64, the architectures the image is
// built for: the filter's call numbers are per architecture.
func Install(Options) (Status, error) {
	return Status{}, fmt.Errorf("sandbox: no seccomp filter for %s/%s (only linux/amd64 and linux/arm64)", runtime.GOOS, runtime.GOARCH)
}

// LandlockABI is 0: the sandbox uses Landlock on linux/amd64 and linux/arm64 only.
func LandlockABI() int { return 0 }
