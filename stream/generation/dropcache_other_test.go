//go:build !linux

package generation

import "errors"

func dropFileCache(string) error {
	return errors.New("dropping a file's page cache is implemented on Linux only")
}
