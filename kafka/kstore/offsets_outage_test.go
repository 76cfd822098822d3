package kstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/nereusstream/nereus-go/metadata"
	"github.com/nereusstream/nereus-go/metadata/memstore"
	"github.com/nereusstream/nereus-go/stream/streammem"
)

// flakyTopics fails every read of a topic record while on (a metadata
// outage as the store sees it).
type flakyTopics struct {
	*memstore.Store
	on bool
}

func (f *flakyTopics) Get(ctx context.Context, key string) (metadata.Record, error) {
	if f.on && strings.HasPrefix(key, keyTopics) {
		return metadata.Record{}, fmt.Errorf("test: %w", metadata.ErrUnavailable)
	}
	return f.Store.Get(ctx, key)
}

// TestFetchOffsetsFailsOnOutage: a topic that cannot be loaded because the
// metadata store is unavailable is not a deleted topic: FetchOffsets fails
// (retriable) instead of answering "no committed offset", which would make
// the consumer reset (the third bug the kstore simulation found).
func TestFetchOffsetsFailsOnOutage(t *testing.T) {
	ctx := context.Background()
	streams, meta := streammem.New(), &flakyTopics{Store: memstore.New()}
	s, err := New(streams, meta, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	if _, err := s.CreateTopic(ctx, "t", 1, nil, false); err != nil {
		t.Fatal(err)
	}
	if errs := s.CommitOffsets(ctx, "g", []OffsetCommit{{Topic: "t", Offset: 7}}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	fresh, err := New(streams, meta, Config{}) // an empty topic cache
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close(ctx)
	meta.on = true
	if offs, err := fresh.FetchOffsets(ctx, "g"); !errors.Is(err, metadata.ErrUnavailable) {
		t.Fatalf("fetch during an outage: %v, %v; want the outage's error", offs, err)
	}
	meta.on = false
	if offs, err := fresh.FetchOffsets(ctx, "g"); err != nil || offs[TopicPartition{"t", 0}].Offset != 7 {
		t.Fatalf("fetch after the outage: %v, %v", offs, err)
	}
}
