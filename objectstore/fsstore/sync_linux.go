package fsstore

import (
	"errors"
	"os"
	"syscall"
)

// fdatasync flushes f's data and the metadata needed to read it back (its
// length), which is all a write-once object file needs.
func fdatasync(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}

// soleOpener reports whether f is the only open file, in any process, that
// refers to its inode: the kernel grants a write lease only then. The lease
// is given back at once; it is the check, not a lock (recycle.go, step 3).
func soleOpener(f *os.File) bool {
	fd := f.Fd()
	if _, _, e := syscall.Syscall(syscall.SYS_FCNTL, fd, syscall.F_SETLEASE, syscall.F_WRLCK); e != 0 {
		return false
	}
	_, _, _ = syscall.Syscall(syscall.SYS_FCNTL, fd, syscall.F_SETLEASE, syscall.F_UNLCK)
	return true
}
