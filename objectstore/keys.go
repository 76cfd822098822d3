package objectstore

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Key rules shared by every backend, so a key that works on one works on all
// of them (the filesystem backend needs them to map keys to paths safely;
// S3 accepts a superset).
const (
	// MaxKeyLen is the longest accepted key in bytes (S3's own limit).
	MaxKeyLen = 1024
	// MaxKeySegmentLen is the longest accepted slash-separated segment in
	// bytes: a filesystem name of at most 255 bytes with room for a
	// backend suffix.
	MaxKeySegmentLen = 253
)

// CheckKey reports whether key is a valid object key: non-empty UTF-8 of at
// most MaxKeyLen bytes, not starting with "/", without NUL, and made of
// non-empty segments other than "." and ".." of at most MaxKeySegmentLen
// bytes. It returns nil or an error wrapping ErrInvalidArgument. Backends
// call it before any I/O.
func CheckKey(key string) error {
	bad := func(why string) error {
		return fmt.Errorf("objectstore: key %q: %w: %s", key, ErrInvalidArgument, why)
	}
	switch {
	case key == "":
		return bad("empty key")
	case len(key) > MaxKeyLen:
		return bad(fmt.Sprintf("longer than %d bytes", MaxKeyLen))
	case !utf8.ValidString(key):
		return bad("not valid UTF-8")
	case strings.HasPrefix(key, "/"):
		return bad("leading slash")
	case strings.ContainsRune(key, 0):
		return bad("contains NUL")
	}
	for seg := range strings.SplitSeq(key, "/") {
		switch {
		case seg == "":
			return bad("empty segment")
		case seg == "." || seg == "..":
			return bad("dot segment")
		case len(seg) > MaxKeySegmentLen:
			return bad(fmt.Sprintf("segment longer than %d bytes", MaxKeySegmentLen))
		}
	}
	return nil
}
