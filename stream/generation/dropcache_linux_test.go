package generation

import (
	"os"
	"syscall"
)

// dropFileCache asks the kernel to drop path's clean pages from the page
// cache (posix_fadvise POSIX_FADV_DONTNEED), so the next read comes from the
// device. It touches only this file's pages, unlike drop_caches.
func dropFileCache(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	const fadvDontNeed = 4
	if _, _, errno := syscall.Syscall6(syscall.SYS_FADVISE64, f.Fd(), 0, 0, fadvDontNeed, 0, 0); errno != 0 {
		return errno
	}
	return nil
}
