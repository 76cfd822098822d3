package fsstore

import (
	"path/filepath"
	"strings"

	"github.com/nereusstream/nereus-go/objectstore"
)

// Key-to-path mapping.
//
// A key "a/b/c" is stored at objects/a.d/b.d/c.o: every directory segment
// gets the suffix ".d" and the final segment the suffix ".o". Because the two
// suffixes differ, an object "a" (file a.o) and objects under "a/" (directory
// a.d) coexist, as they do in S3, and no key can name a directory or vice
// versa. The suffixes also keep every name distinct from "." and "..".
const (
	dirSuffix  = ".d"
	fileSuffix = ".o"
)

// checkKey applies the shared key rules (objectstore.CheckKey), which
// already guarantee every segment maps to a safe file name: non-empty, not
// "." or "..", no NUL, and short enough for its suffix.
func checkKey(key string) error { return objectstore.CheckKey(key) }

// relPath maps a checked key to its path relative to the objects directory.
func relPath(key string) string {
	segs := strings.Split(key, "/")
	for i := range segs[:len(segs)-1] {
		segs[i] += dirSuffix
	}
	segs[len(segs)-1] += fileSuffix
	return filepath.Join(segs...)
}

// entryName decodes a directory entry name into its key segment and whether
// it is a directory. ok is false for names the store did not write.
func entryName(name string, isDir bool) (seg string, ok bool) {
	suffix := fileSuffix
	if isDir {
		suffix = dirSuffix
	}
	seg, ok = strings.CutSuffix(name, suffix)
	return seg, ok && seg != ""
}
