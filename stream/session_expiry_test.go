package stream_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nereusstream/nereus-go/stream"
	"github.com/nereusstream/nereus-go/stream/provider/memprovider"
)

// TestExpiredSessionTakeover: a writer that stops renewing (its process
// closed without releasing) keeps its session until the TTL has passed;
// after that another writer still needs StealExpired, and stealing it fences
// the old session. Time passes in a synctest bubble, so the 30 s TTL costs
// nothing.
func TestExpiredSessionTakeover(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		ctx := context.Background()
		c1, err := stream.Open(ctx, stream.Config{Metadata: e.meta, ObjectWAL: e.prov, WriterID: "b1", SessionTTL: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		info, err := c1.Create(ctx, "expiry", stream.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s1, err := c1.AcquireSession(ctx, info.ID, stream.SessionOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c1.Append(ctx, s1, stream.AppendRequest{Entries: []stream.Entry{entry("a")}, ExpectedStart: -1}); err != nil {
			t.Fatal(err)
		}
		// b2 is another process: its own WAL (b1's Close closes b1's).
		c2, err := stream.Open(ctx, stream.Config{Metadata: e.meta, ObjectWAL: memprovider.New(2, memprovider.Faults{}), WriterID: "b2"})
		if err != nil {
			t.Fatal(err)
		}
		defer c2.Close()

		// While b1 runs it renews: its session never expires.
		time.Sleep(2 * time.Minute)
		if _, err := c2.AcquireSession(ctx, info.ID, stream.SessionOptions{StealExpired: true}); !errors.Is(err, stream.ErrSessionBusy) {
			t.Fatalf("live, renewed session: %v", err)
		}
		// b1 stops without releasing: the session lives out its TTL.
		if err := c1.Close(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Second)
		if _, err := c2.AcquireSession(ctx, info.ID, stream.SessionOptions{StealExpired: true}); !errors.Is(err, stream.ErrSessionBusy) {
			t.Fatalf("before the TTL passed: %v", err)
		}
		time.Sleep(31 * time.Second)
		if _, err := c2.AcquireSession(ctx, info.ID, stream.SessionOptions{}); !errors.Is(err, stream.ErrSessionBusy) {
			t.Fatalf("expired, without StealExpired: %v", err)
		}
		s2, err := c2.AcquireSession(ctx, info.ID, stream.SessionOptions{StealExpired: true})
		if err != nil {
			t.Fatalf("expired, with StealExpired: %v", err)
		}
		if s2.Epoch <= s1.Epoch {
			t.Fatalf("epoch did not grow: %d -> %d", s1.Epoch, s2.Epoch)
		}
		r, err := c2.Append(ctx, s2, stream.AppendRequest{Entries: []stream.Entry{entry("b")}, ExpectedStart: 1})
		if err != nil || r.Start != 1 {
			t.Fatalf("append after takeover: %+v %v", r, err)
		}
	})
}
