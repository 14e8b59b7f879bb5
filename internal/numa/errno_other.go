//go:build !linux

package numa

import "errors"

var errESRCH = errors.New("no such process")
