package logstore

import (
	"errors"
	"os"
	"syscall"
)

// fdatasync flushes f's data, and its size only when the size changed: the
// log is zero-filled ahead of the writer (logfile.go) so a commit's flush
// normally carries no inode update.
func fdatasync(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}
