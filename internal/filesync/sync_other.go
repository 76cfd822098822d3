//go:build !linux

package filesync

import "os"

// Fdatasync is fsync where the system has no fdatasync.
func Fdatasync(f *os.File) error { return f.Sync() }
