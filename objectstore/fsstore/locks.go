//go:build unix

package fsstore

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"syscall"
)

const (
	lockEx = syscall.LOCK_EX
	lockUn = syscall.LOCK_UN
)

// lockShards is the number of per-key lock shards. Keys hash onto shards;
// two keys on one shard merely serialize their (short) check+publish steps.
const lockShards = 64

// shardLock serializes the check+publish step of every mutation of the keys
// that hash to it, across goroutines (the channel) and across processes (an
// exclusive flock on a lock file that is never deleted, so every process
// locks the same inode). The channel is acquired first so that goroutines
// of one process queue in-process (cancellable) and only one per process
// waits in flock.
type shardLock struct {
	sem  chan struct{}
	file *os.File
}

func openShardLocks(dir string) ([]*shardLock, error) {
	locks := make([]*shardLock, lockShards)
	for i := range locks {
		f, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("%02x.lock", i)), os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			closeShardLocks(locks)
			return nil, fmt.Errorf("fsstore: open lock shard: %w", err)
		}
		locks[i] = &shardLock{sem: make(chan struct{}, 1), file: f}
	}
	return locks, nil
}

func closeShardLocks(locks []*shardLock) {
	for _, l := range locks {
		if l != nil {
			_ = l.file.Close()
		}
	}
}

func shardOf(key string) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	return int(h.Sum32() % lockShards)
}

// lock acquires the shard in-process (honouring ctx) and then across
// processes. flock itself cannot be cancelled, but it is only ever held for
// one check+rename+fsync, so the wait is bounded by other writers' fsyncs.
func (l *shardLock) lock(ctx context.Context) error {
	select {
	case l.sem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	if err := flock(l.file, syscall.LOCK_EX); err != nil {
		<-l.sem
		return fmt.Errorf("fsstore: flock: %w", err)
	}
	return nil
}

func (l *shardLock) unlock() {
	_ = flock(l.file, syscall.LOCK_UN)
	<-l.sem
}

// flock retries on EINTR.
func flock(f *os.File, how int) error {
	for {
		err := syscall.Flock(int(f.Fd()), how)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}

// tryFlock takes an exclusive flock without blocking; ok is false if another
// open file description holds it.
func tryFlock(f *os.File) (ok bool, err error) {
	err = flock(f, syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return false, nil
	}
	return err == nil, err
}

// sameFile reports whether the open file f is still the inode linked at path
// (it was not unlinked or replaced since it was opened).
func sameFile(f *os.File, path string) bool {
	a, err := f.Stat()
	if err != nil {
		return false
	}
	b, err := os.Stat(path)
	if err != nil {
		return false
	}
	return os.SameFile(a, b)
}
