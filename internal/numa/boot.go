// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package numa

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// ReadBootID returns the kernel's boot id (procRoot/sys/kernel/random/boot_id), which
// changes at every boot: task ids and start times name tasks of one boot only. A kernel
// without the file yields an error wrapping fs.ErrNotExist.
func ReadBootID(procRoot string) (string, error) {
	path := filepath.Join(procRoot, "sys", "kernel", "random", "boot_id")
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("reading the boot id: %w", err)
	}
	id := strings.TrimSpace(string(data))
	if id == "" {
		return "", errors.New("reading the boot id: " + path + " is empty")
	}
	return id, nil
}
