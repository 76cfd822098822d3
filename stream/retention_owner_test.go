package stream_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/metadata/memstore"
	objmem "github.com/nereusstream/nereus-go/objectstore/memstore"
	"github.com/nereusstream/nereus-go/stream"
	"github.com/nereusstream/nereus-go/stream/objectwal"
)

// switchOwnership is an Ownership that owns every stream or none.
type switchOwnership struct {
	owns atomic.Bool
	mu   sync.Mutex
	ch   chan struct{}
}

func newSwitchOwnership() *switchOwnership { return &switchOwnership{ch: make(chan struct{})} }

func (o *switchOwnership) OwnsStream(string) bool { return o.owns.Load() }

func (o *switchOwnership) Changes() <-chan struct{} {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.ch
}

func (o *switchOwnership) set(v bool) {
	o.owns.Store(v)
	o.mu.Lock()
	close(o.ch)
	o.ch = make(chan struct{})
	o.mu.Unlock()
}

// TestRetentionOnlyWhereOwned: retention is enforced by the node that owns
// a stream, not by every node that can list it. Process a writes a stream
// with size retention and never runs retention itself (hourly); process b
// runs retention passes (called directly) but does not own the stream: the
// stream is not trimmed. Once b owns it, b's next pass trims it.
func TestRetentionOnlyWhereOwned(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	meta, objs := memstore.New(), objmem.New()
	open := func(writer string, own stream.Ownership, retention time.Duration) *stream.Core {
		w, err := objectwal.Open(ctx, objectwal.Config{Store: objs, Prefix: "wal/" + writer, FlushInterval: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		c, err := stream.Open(ctx, stream.Config{Metadata: meta, ObjectWAL: w, ObjectStore: objs, WriterID: writer, Ownership: own,
			RetentionInterval: retention, Logger: testLogger(t),
			Lifecycle: stream.LifecycleConfig{DisableMaterialization: true, GCInterval: time.Hour}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	a := open("a", nil, time.Hour)
	bOwn := newSwitchOwnership()
	b := open("b", bOwn, time.Hour)
	info, err := a.Create(ctx, "sized", stream.CreateOptions{Retention: stream.Retention{Bytes: 2000}})
	if err != nil {
		t.Fatal(err)
	}
	s, err := a.AcquireSession(ctx, info.ID, stream.SessionOptions{WriterID: "a"})
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, a, s, 0, 300) // ~20 KB, ten times the retention bound

	// b does not own it: its retention passes leave it untrimmed.
	for i := 0; i < 5; i++ {
		if err := b.EnforceRetention(ctx); err != nil {
			t.Fatal(err)
		}
	}
	in, err := b.Describe(ctx, info.ID)
	if err != nil {
		t.Fatal(err)
	}
	if in.StartOffset != 0 || b.LifecycleStats().RetentionTrims != 0 || a.LifecycleStats().RetentionTrims != 0 {
		t.Fatalf("trimmed to %d by a process that does not own the stream (b trims %d, a trims %d)",
			in.StartOffset, b.LifecycleStats().RetentionTrims, a.LifecycleStats().RetentionTrims)
	}
	// b owns it now: its next pass enforces the retention.
	bOwn.set(true)
	if err := b.EnforceRetention(ctx); err != nil {
		t.Fatal(err)
	}
	in, err = b.Describe(ctx, info.ID)
	if err != nil || in.StartOffset == 0 || b.LifecycleStats().RetentionTrims == 0 {
		t.Fatalf("the owner's retention pass did not trim: %+v, %v, %d trims", in, err, b.LifecycleStats().RetentionTrims)
	}
	if in.RetainedBytes > 2*2000+1000 {
		t.Fatalf("retained %d bytes after size retention of 2000", in.RetainedBytes)
	}
}
