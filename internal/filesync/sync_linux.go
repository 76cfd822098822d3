package filesync

import (
	"errors"
	"os"
	"syscall"
)

// Fdatasync flushes f's data, and its size only when the size changed.
func Fdatasync(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}
