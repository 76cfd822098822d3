package fsstore

import (
	"os"

	"golang.org/x/sys/unix"
)

var pageSize = int64(os.Getpagesize())

// pagesCached reports whether every page of [off, off+n) of f is resident
// in the page cache (n > 0). Any error (ENOSYS before Linux 6.5) is "no".
func pagesCached(f *os.File, off, n int64) bool {
	first, end := off/pageSize, (off+n+pageSize-1)/pageSize
	r := unix.CachestatRange{Off: uint64(first * pageSize), Len: uint64((end - first) * pageSize)}
	var st unix.Cachestat_t
	if err := unix.Cachestat(uint(f.Fd()), &r, &st, 0); err != nil {
		return false
	}
	return int64(st.Cache) >= end-first
}
