package managedledger

import (
	"context"
	"errors"
	"testing"

	"github.com/nereusstream/nereus-go/stream"
)

func TestMessageCountedOffsets(t *testing.T) {
	ctx := context.Background()
	f, _, st := newFactory(t)
	name, _ := ParseTopicName("mc")
	l, err := f.Open(ctx, name, true)
	if err != nil {
		t.Fatal(err)
	}
	if !l.CountsMessages() {
		t.Fatal("new topic is not message-counted")
	}
	info, _ := l.Info(ctx)
	if info.Attributes[AttrEntryFormat] != EntryFormatV2 {
		t.Fatalf("stream attributes %v", info.Attributes)
	}
	if err := l.AcquireWriter(ctx); err != nil {
		t.Fatal(err)
	}
	r1, err := l.AppendAsync(stream.Entry{Payload: []byte("batch of 3"), RecordCount: 3}, nil).Wait(ctx)
	if err != nil || r1.Start != 0 || r1.End != 3 {
		t.Fatalf("append %+v %v", r1, err)
	}
	r2, err := l.AppendAsync(stream.Entry{Payload: []byte("batch of 2"), RecordCount: 2}, nil).Wait(ctx)
	if err != nil || r2.Start != 3 || r2.End != 5 {
		t.Fatalf("append %+v %v", r2, err)
	}
	if e, ok, err := l.EntryContaining(ctx, 1); err != nil || !ok || e.Offset != 0 || e.Count != 3 {
		t.Fatalf("entry containing 1: %+v %v %v", e, ok, err)
	}
	if _, ok, _ := l.ReadOne(ctx, 1); ok {
		t.Fatal("ReadOne found an entry starting inside a batch")
	}
	if _, ok, _ := l.EntryContaining(ctx, 5); ok {
		t.Fatal("entry past the end")
	}

	c, _, err := l.OpenCursor(ctx, "s", func() (int64, error) { return 0, nil })
	if err != nil {
		t.Fatal(err)
	}
	c.AckBatch(0, 3, []uint64{0b110}) // message 0 acknowledged
	if got := c.BatchAckSet(0, 3); len(got) != 1 || got[0] != 0b110 || c.AckedBelow() != 1 {
		t.Fatalf("ack set %b, acked below %d", got, c.AckedBelow())
	}
	c.AckBatch(0, 3, []uint64{0b010}) // message 2 too
	if got := c.BatchAckSet(0, 3); got[0] != 0b010 || c.IsAcked(0, 3) {
		t.Fatalf("ack set %b", got)
	}
	if b := c.Backlog(5); b != 3 {
		t.Fatalf("backlog %d, want 3 unacknowledged messages", b)
	}
	c.AckBatch(0, 3, []uint64{0})
	if !c.IsAcked(0, 3) || c.AckedBelow() != 3 || c.BatchAckSet(0, 3) != nil {
		t.Fatalf("entry not acknowledged: %+v", c.Snapshot())
	}
	// A Kafka-style commit in the middle of an entry: offset 4 is next.
	c.Reset(4)
	if got := c.BatchAckSet(3, 2); len(got) != 1 || got[0] != 0b10 {
		t.Fatalf("ack set after a mid-entry reset: %b", got)
	}
	c.AckCumulative(3, 2)
	if c.AckedBelow() != 5 {
		t.Fatalf("cumulative over a batch: %d", c.AckedBelow())
	}
	if err := c.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	// An entry-counted topic stores every entry as one offset.
	fe, _, _ := newFactoryCfg(t, Config{WriterID: "b2", AuthorityEpoch: 1, EntryCountedTopics: true})
	fe.storage = st
	old, _ := ParseTopicName("old")
	lo, err := fe.Open(ctx, old, true)
	if err != nil {
		t.Fatal(err)
	}
	if lo.CountsMessages() {
		t.Fatal("entry-counted topic counts messages")
	}
	if err := lo.AcquireWriter(ctx); err != nil {
		t.Fatal(err)
	}
	if r, err := lo.AppendAsync(stream.Entry{Payload: []byte("x"), RecordCount: 7}, nil).Wait(ctx); err != nil || r.End-r.Start != 1 {
		t.Fatalf("entry-counted append %+v %v", r, err)
	}
}

func TestLedgersShareOneWriter(t *testing.T) {
	ctx := context.Background()
	f, _, st := newFactory(t)
	name, _ := ParseTopicName("shared")
	l1, _ := f.Open(ctx, name, true)
	l2, _ := f.Open(ctx, name, false)
	if err := l1.AcquireWriter(ctx); err != nil {
		t.Fatal(err)
	}
	if err := l2.AcquireWriter(ctx); err != nil {
		t.Fatal(err)
	}
	e1, _ := l1.WriterEpoch()
	e2, _ := l2.WriterEpoch()
	if e1 != e2 || e1 == 0 {
		t.Fatalf("epochs %d %d", e1, e2)
	}
	if err := l1.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := l2.AppendAsync(stream.Entry{Payload: []byte("x"), RecordCount: 1}, nil).Wait(ctx); err != nil {
		t.Fatalf("append after the other holder closed: %v", err)
	}
	if _, err := l1.AppendAsync(stream.Entry{Payload: []byte("x"), RecordCount: 1}, nil).Wait(ctx); !errors.Is(err, ErrNoWriter) {
		t.Fatalf("closed ledger appended: %v", err)
	}
	if err := l2.Close(ctx); err != nil {
		t.Fatal(err)
	}
	info, _ := st.Describe(ctx, l2.StreamID())
	if !info.Session.Expires.IsZero() {
		t.Fatalf("session not released by the last holder: %+v", info.Session)
	}
	// A fenced session dropped by one holder is re-acquired by the next.
	if err := l1.AcquireWriter(ctx); err != nil {
		t.Fatal(err)
	}
	if err := l2.AcquireWriter(ctx); err != nil {
		t.Fatal(err)
	}
	l1.DropWriter()
	if _, ok := l2.WriterEpoch(); ok {
		t.Fatal("dropped session still held by the other ledger")
	}
	if err := l2.AcquireWriter(ctx); err != nil {
		t.Fatal(err)
	}
}
