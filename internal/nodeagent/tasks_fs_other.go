//go:build !linux

package nodeagent

import (
	"io"
	"os"
	"slices"
)

// readFileBuf reads a whole file into *buf, growing it as needed, and returns the bytes.
func readFileBuf(path string, buf *[]byte) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := (*buf)[:0]
	for {
		if len(b) == cap(b) {
			b = slices.Grow(b, 4096)
		}
		n, err := f.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			*buf = b
			return nil, err
		}
	}
	*buf = b
	return b, nil
}

// readSubdirs returns the names of dir's subdirectories, sorted.
func readSubdirs(dir string, _ *[]byte) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() {
			names = append(names, e.Name())
		}
	}
	return names, nil
}
