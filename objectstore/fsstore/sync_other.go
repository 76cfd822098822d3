//go:build unix && !linux

package fsstore

import "os"

func fdatasync(f *os.File) error { return f.Sync() }

// soleOpener: without Linux's leases there is no way to know that nobody
// else has the inode open, so retired inodes are never reused here.
func soleOpener(*os.File) bool { return false }
