package stream_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/internal/testenv/acklog"
	"github.com/nereusstream/nereus-go/metadata/faultstore"
	"github.com/nereusstream/nereus-go/metadata/memstore"
	"github.com/nereusstream/nereus-go/stream"
	"github.com/nereusstream/nereus-go/stream/provider/memprovider"
)

// TestMetadataOutageUnderLoad: the metadata store stops answering (every
// call fails as unavailable) while writers append, for longer than a session
// TTL, then comes back. Meanwhile Core.Health reports metadata degraded,
// appends end as commit-unknown when their callers give up (never as
// committed-then-lost), and reads of owned streams keep working; afterwards
// appends succeed again without a restart, and every acknowledged append
// reads back exactly once at its offset, in order per writer.
func TestMetadataOutageUnderLoad(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	meta := faultstore.Wrap(memstore.New(), faultstore.Config{Seed: 1})
	c, err := stream.Open(ctx, stream.Config{Metadata: meta, ObjectWAL: memprovider.New(1, memprovider.Faults{}), WriterID: "b1",
		SessionTTL: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const streams = 3
	acks := acklog.New()
	ids := make([]stream.ID, streams)
	var unknown, other atomic.Int64
	var lastOther atomic.Value
	lctx, stopLoad := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for s := range streams {
		info, err := c.Create(ctx, fmt.Sprint("m", s), stream.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ids[s] = info.ID
		sess, err := c.AcquireSession(ctx, info.ID, stream.SessionOptions{})
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; lctx.Err() == nil; i++ {
				p := acklog.Payload(info.Name, i)
				actx, acancel := context.WithTimeout(lctx, 300*time.Millisecond) // a client's request timeout
				acks.Begin()
				r, err := c.Append(actx, sess, stream.AppendRequest{ExpectedStart: -1, Entries: []stream.Entry{{Payload: []byte(p), RecordCount: 1}}})
				acks.End()
				acancel()
				switch {
				case err == nil:
					if err := acks.Ack(info.Name, acklog.Pos{Offset: r.Start}, p); err != nil {
						t.Error(err)
						return
					}
				case lctx.Err() != nil:
					return
				case stream.CommitCertainty(err) == stream.MaybeCommitted:
					unknown.Add(1)
				default:
					// Not committed: appends admitted behind an unsettled
					// one are failed once it settles. Anything is fine
					// here except a lie, which Verify would catch.
					other.Add(1)
					lastOther.Store(err)
					time.Sleep(5 * time.Millisecond)
				}
			}
		}()
	}
	defer func() { stopLoad(); wg.Wait() }()
	wait := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s (acks %d, unknown %d, other %d (%v), health %+v)",
					what, acks.Count(), unknown.Load(), other.Load(), lastOther.Load(), c.Health())
			}
		}
	}
	metaHealth := func() stream.ComponentHealth { return c.Health()[0] }

	n := acks.Count()
	wait("progress before the outage", func() bool { return acks.Count() >= n+100 })
	meta.SetRules(faultstore.Rule{FailRate: 1})
	wait("metadata to be reported degraded", func() bool { return metaHealth().Degraded })
	wait("appends to end commit-unknown", func() bool { return unknown.Load() >= 5 })
	for _, id := range ids {
		if _, err := c.Read(ctx, id, 0, stream.ReadOptions{MaxEntries: 10}); err != nil {
			t.Errorf("read of an owned stream during the outage: %v", err)
		}
	}
	time.Sleep(3 * time.Second) // longer than the session TTL
	t.Logf("outage: metadata degraded (%s); %d appends unknown", metaHealth().Reason, unknown.Load())
	meta.SetRules()
	wait("metadata to recover", func() bool { h := metaHealth(); return !h.Degraded && h.Recoveries >= 1 })
	n = acks.Count()
	wait("progress after the outage", func() bool { return acks.Count() >= n+100 })
	stopLoad()
	wg.Wait()
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
		if err := acks.Verify(fmt.Sprint("m", s), read); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d acknowledged appends verified, %d ended commit-unknown, %d not committed (e.g. %v)",
		acks.Count(), unknown.Load(), other.Load(), lastOther.Load())
}
