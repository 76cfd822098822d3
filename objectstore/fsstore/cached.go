//go:build unix

package fsstore

import (
	"context"
	"fmt"

	"github.com/nereusstream/nereus-go/objectstore"
)

// Cached implements objectstore.CacheProber: whether every page of the
// file that holds [offset, offset+length) of key's data is in the page
// cache (cachestat(2), Linux 6.5+: it counts resident pages and starts no
// I/O). It opens the object as a read does (verified path, checked
// header), so a missing key is ErrNotFound and a torn file ErrCorrupt.
// False where the kernel cannot tell (another OS, an older kernel).
func (s *Store) Cached(ctx context.Context, key string, offset, length int64) (bool, error) {
	if err := s.checkOpen(); err != nil {
		return false, err
	}
	if err := ctx.Err(); err != nil {
		return false, err
	}
	if err := checkKey(key); err != nil {
		return false, err
	}
	if offset < 0 || length < 0 {
		return false, fmt.Errorf("fsstore: %q: %w: range at %d of %d bytes", key, objectstore.ErrInvalidArgument, offset, length)
	}
	f, h, err := s.openObject(key)
	if err != nil {
		return false, err
	}
	defer func() { _ = f.Close() }()
	size := int64(h.size)
	if offset >= size || length == 0 {
		return true, nil // nothing to read: nothing to wait for
	}
	length = min(length, size-offset)
	return pagesCached(f, h.dataOffset()+offset, length), nil
}
