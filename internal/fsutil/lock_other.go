// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build !linux

package fsutil

import (
	"errors"
	"os"
)

const noFollow = 0

// tryFlock is unsupported: the agent runs on Linux only.
func tryFlock(*os.File) error { return errors.New("file locks are implemented for Linux only") }
