// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build !linux

package fsutil

import (
	"bytes"
	"os"
)

// ReadFileInto returns the whole contents of path, read through one open file. If buf is
// not nil, *buf is reused as the read buffer, grown as needed, and left holding the bytes
// read; the result then aliases *buf. With a nil buf every call returns a new slice.
func ReadFileInto(path string, buf *[]byte) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var b []byte
	if buf != nil {
		b = (*buf)[:0]
	}
	w := bytes.NewBuffer(b)
	_, err = w.ReadFrom(f)
	if buf != nil {
		*buf = w.Bytes()
	}
	if err != nil {
		return nil, err
	}
	return w.Bytes(), nil
}
