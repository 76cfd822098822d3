//go:build unix

package fsstore

import (
	"os"
	"sync/atomic"
)

// Paced writeback of large objects.
//
// A large object (a 16 MiB generation, a merged one) written with one
// write and one fdatasync puts all of its dirty pages at the device at
// once, and every other writer's flush — the Object WAL segment and
// manifest fdatasyncs that acknowledge producers, the metadata log's — waits
// behind them: their few KiB reach a device that already has 16 MiB queued
// (and on a journaled ext4 a commit also waits for the ordered data of
// every inode in its transaction). At 10,000 Pulsar messages/s (one 16 MiB
// generation every ~1.6 s) that was most of the publish p99
// (docs/notes/issue-15-ops.md, session 18: ext4 without a journal).
//
// So an object of at least pacedWriteMin bytes is written in chunks of
// writebackChunk: once chunk k is written its writeback is started
// (sync_file_range WRITE, asynchronous), and chunk k-1's is waited for
// before chunk k+1 is written. At most two chunks of one object are then
// in flight, and a concurrent small flush queues behind at most that.
//
// Durability is unchanged and still comes only from writeTemp's fdatasync
// after the last chunk: sync_file_range flushes neither the file's metadata
// nor the device's cache, so it orders nothing. Its errors are returned,
// not ignored: a write-back error it reports is consumed from the file's
// error state (Linux errseq), so the fdatasync after it would not see it
// again. Where the call is not supported (ENOSYS, EINVAL or EOPNOTSUPP
// from the file system, another platform) the object is written in one
// piece, as before.
const (
	writebackChunk = 1 << 20
	pacedWriteMin  = 4 << 20
)

// writebackUnpaced is set once sync_file_range turned out to be
// unsupported where the store lives.
var writebackUnpaced atomic.Bool

// writebackHook, when set (only by tests), is told of each chunk's start
// ("start") and wait ("await") before the call is made, and an error it
// returns is that call's.
var writebackHook func(op string, off int64, n int) error

// writeData writes data at off in f, paced as above when it is large.
func writeData(f *os.File, data []byte, off int64) error {
	if len(data) < pacedWriteMin || !pacingSupported || writebackUnpaced.Load() {
		_, err := f.WriteAt(data, off)
		return err
	}
	prevOff, prevLen := int64(-1), 0
	for len(data) > 0 {
		n := min(len(data), writebackChunk)
		if _, err := f.WriteAt(data[:n], off); err != nil {
			return err
		}
		if err := writeback(startWriteback, "start", f, off, n); err != nil {
			return err
		}
		if prevOff >= 0 {
			if err := writeback(awaitWriteback, "await", f, prevOff, prevLen); err != nil {
				return err
			}
		}
		prevOff, prevLen = off, n
		off += int64(n)
		data = data[n:]
	}
	return nil
}

func writeback(call func(*os.File, int64, int) error, op string, f *os.File, off int64, n int) error {
	if writebackHook != nil {
		if err := writebackHook(op, off, n); err != nil {
			return err
		}
	}
	return call(f, off, n)
}
