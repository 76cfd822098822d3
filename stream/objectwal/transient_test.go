package objectwal_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/internal/testenv/acklog"
	mdmem "github.com/nereusstream/nereus-go/metadata/memstore"
	"github.com/nereusstream/nereus-go/objectstore"
	osmem "github.com/nereusstream/nereus-go/objectstore/memstore"
	"github.com/nereusstream/nereus-go/stream"
	"github.com/nereusstream/nereus-go/stream/objectwal"
)

// fullDisk is an object store whose writes fail with ENOSPC, the way
// fsstore reports a full file system, while full is set.
type fullDisk struct {
	objectstore.ObjectStore
	full   atomic.Bool
	refuse atomic.Int64
}

func (f *fullDisk) Put(ctx context.Context, key string, data []byte, o objectstore.PutOptions) (objectstore.UpdateVersion, error) {
	if f.full.Load() {
		f.refuse.Add(1)
		return objectstore.UpdateVersion{}, fmt.Errorf("fsstore: %q: write temp file: %w", key, syscall.ENOSPC)
	}
	return f.ObjectStore.Put(ctx, key, data, o)
}

// TestRecoversFromFullDiskUnderLoad: writers append to several streams
// while the object store's disk fills up and is freed again. While it is
// full the Object WAL says degraded, appends fail as not committed with
// stream.ErrStorageUnavailable (retriable), and committed data stays
// readable; once it is freed the WAL re-claims its log at a new epoch and
// appends succeed again, without a restart. Every acknowledged append
// reads back exactly once at its offset, in order per writer.
func TestRecoversFromFullDiskUnderLoad(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	disk := &fullDisk{ObjectStore: osmem.New()}
	prov, err := objectwal.Open(ctx, objectwal.Config{Store: disk, Prefix: "wal/b1", FlushInterval: 2 * time.Millisecond, TruncateInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	c, err := stream.Open(ctx, stream.Config{Metadata: mdmem.New(), ObjectWAL: prov, WriterID: "b1"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	const streams, writers = 3, 2
	acks := acklog.New()
	ids := make([]stream.ID, streams)
	var storageErrs, otherErrs atomic.Int64
	var lastOther atomic.Value
	lctx, stopLoad := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for s := range streams {
		info, err := c.Create(ctx, fmt.Sprint("s", s), stream.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ids[s] = info.ID
		sess, err := c.AcquireSession(ctx, info.ID, stream.SessionOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				key := fmt.Sprintf("s%d-w%d", s, w)
				for i := 0; lctx.Err() == nil; i++ {
					p := acklog.Payload(key, i)
					acks.Begin()
					r, err := c.Append(lctx, sess, stream.AppendRequest{ExpectedStart: -1, Entries: []stream.Entry{{Payload: []byte(p), RecordCount: 1}}})
					acks.End()
					switch {
					case err == nil:
						if err := acks.Ack(info.Name, acklog.Pos{Offset: r.Start}, p); err != nil {
							t.Error(err)
							return
						}
					case errors.Is(err, stream.ErrStorageUnavailable):
						if stream.CommitCertainty(err) != stream.NotCommitted {
							t.Errorf("storage error with certainty %v: %v", stream.CommitCertainty(err), err)
						}
						storageErrs.Add(1)
						time.Sleep(5 * time.Millisecond) // a client's retry backoff
					case lctx.Err() != nil:
						return
					default:
						otherErrs.Add(1)
						lastOther.Store(err)
						time.Sleep(5 * time.Millisecond)
					}
				}
			}()
		}
	}
	defer func() { stopLoad(); wg.Wait() }()
	wait := func(what string, d time.Duration, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(d); !cond(); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out after %v waiting for %s (acks %d, storage errors %d, other errors %d, last other %v, health %+v)",
					d, what, acks.Count(), storageErrs.Load(), otherErrs.Load(), lastOther.Load(), c.Health())
			}
		}
	}
	walHealth := func() stream.ComponentHealth {
		for _, h := range c.Health() {
			if h.Component == objectwal.Name {
				return h
			}
		}
		t.Fatal("no objectwal component in Core.Health")
		return stream.ComponentHealth{}
	}

	n := acks.Count()
	wait("progress before the disk fills", time.Minute, func() bool { return acks.Count() >= n+200 })
	disk.full.Store(true)
	wait("the WAL to report degraded", time.Minute, func() bool { return walHealth().Degraded })
	wait("appends to fail with ErrStorageUnavailable", time.Minute, func() bool { return storageErrs.Load() >= 10 })
	// Committed data stays readable while nothing can be written.
	for _, id := range ids {
		if _, err := c.Read(ctx, id, 0, stream.ReadOptions{MaxEntries: 10}); err != nil {
			t.Fatalf("read while the disk is full: %v", err)
		}
	}
	t.Logf("disk full: WAL degraded (%s), %d appends refused as storage errors", walHealth().Reason, storageErrs.Load())
	disk.full.Store(false)
	wait("the WAL to recover", time.Minute, func() bool { h := walHealth(); return !h.Degraded && h.Recoveries >= 1 })
	n = acks.Count()
	wait("progress after the disk was freed", time.Minute, func() bool { return acks.Count() >= n+200 })
	stopLoad()
	wg.Wait()
	if n := otherErrs.Load(); n > 0 {
		t.Fatalf("%d appends failed with something other than ErrStorageUnavailable, e.g. %v", n, lastOther.Load())
	}
	for s, id := range ids {
		var read []acklog.Entry
		for from := int64(0); ; {
			res, err := c.Read(ctx, id, from, stream.ReadOptions{MaxEntries: 1000})
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range res.Entries {
				read = append(read, acklog.Entry{Pos: acklog.Pos{Offset: e.Offset}, Payload: string(e.Payload)})
			}
			if len(res.Entries) == 0 || res.Next >= res.EndOffset {
				break
			}
			from = res.Next
		}
		if err := acks.Verify(fmt.Sprint("s", s), read); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d acknowledged appends verified; %d refused while full (%d store writes refused); WAL recoveries %d",
		acks.Count(), storageErrs.Load(), disk.refuse.Load(), walHealth().Recoveries)
}
