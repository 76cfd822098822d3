package fsstore

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

const pacingSupported = true

// startWriteback starts writing [off, off+n) of f back to the device and
// returns without waiting. A call the kernel or the file system does not
// support (ENOSYS, EINVAL, EOPNOTSUPP: the arguments here are always
// valid) turns pacing off for good, and the chunks are then simply
// written; any other error is the write's.
func startWriteback(f *os.File, off int64, n int) error {
	return syncFileRange(f, off, n, unix.SYNC_FILE_RANGE_WRITE)
}

// awaitWriteback waits until [off, off+n) of f has been written back,
// starting what is not yet started.
func awaitWriteback(f *os.File, off int64, n int) error {
	return syncFileRange(f, off, n,
		unix.SYNC_FILE_RANGE_WAIT_BEFORE|unix.SYNC_FILE_RANGE_WRITE|unix.SYNC_FILE_RANGE_WAIT_AFTER)
}

func syncFileRange(f *os.File, off int64, n int, flags int) error {
	for {
		err := unix.SyncFileRange(int(f.Fd()), off, int64(n), flags)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.ENOSYS), errors.Is(err, unix.EINVAL), errors.Is(err, unix.EOPNOTSUPP):
			writebackUnpaced.Store(true)
			return nil
		default:
			return err
		}
	}
}
