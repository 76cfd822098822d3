//go:build unix && !linux

package fsstore

import "os"

// Without sync_file_range large objects are written in one piece.
const pacingSupported = false

func startWriteback(*os.File, int64, int) error { return nil }
func awaitWriteback(*os.File, int64, int) error { return nil }
