// Command crashfsd serves a crashfs power-loss file system on the directory
// given as its only argument, for crash tests (internal/testenv/crashfs
// starts it and talks to it over stdin and stdout). It runs in its own
// process so the test process can mmap files on the mount — a Go process
// must never page-fault on a FUSE file system it serves itself, or a
// stop-the-world pause waits for a fault that waits for the stopped server.
//
// It is a test tool: never run it on data you want to keep.
package main

import (
	"fmt"
	"os"

	"github.com/nereusstream/nereus-go/internal/testenv/crashfs"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: crashfsd MOUNTPOINT")
		os.Exit(2)
	}
	if err := crashfs.Serve(os.Args[1], os.Stdin, os.Stdout); err != nil {
		fmt.Printf("ERR %v\n", err)
		os.Exit(1)
	}
}
