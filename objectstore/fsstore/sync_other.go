//go:build unix && !linux

package fsstore

import "os"

func fdatasync(f *os.File) error { return f.Sync() }
