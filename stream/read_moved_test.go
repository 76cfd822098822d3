package stream_test

import (
	"errors"
	"testing"

	"github.com/nereusstream/nereus-go/metadata"
	"github.com/nereusstream/nereus-go/stream"
)

// TestUnresolvableLayoutIsRetriable: a read that cannot get past its
// stream's physical layout (here a generation record missing in the
// middle, as a half-finished retirement of an older binary left it) gives
// up after a few re-resolutions with ErrStorageUnavailable — a retriable
// storage error for Kafka and Pulsar clients — never an unclassified one
// (Kafka answered UNKNOWN_SERVER_ERROR).
func TestUnresolvableLayoutIsRetriable(t *testing.T) {
	e := newLCEnv(t)
	a := e.open(t, "b1")
	ctx := ctxT(t)
	id, _ := sixSmallGenerations(t, a, e.meta)
	keys, err := stream.GenRecordKeys(ctx, e.meta, id)
	if err != nil || len(keys) != 6 {
		t.Fatalf("generation records %v: %v", keys, err)
	}
	if err := e.meta.Delete(ctx, keys[2], metadata.AnyVersion); err != nil {
		t.Fatal(err)
	}
	reader := e.open(t, "b2") // a fresh process: no tail cache
	_, err = reader.Read(ctx, id, 10, stream.ReadOptions{MaxEntries: 100})
	if err == nil {
		t.Fatal("the read resolved [10,15) without its generation record: the fixture no longer forces an unresolvable layout")
	}
	if !errors.Is(err, stream.ErrStorageUnavailable) {
		t.Fatalf("read over a missing generation record: %v, want ErrStorageUnavailable", err)
	}
}
