package stream

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/metadata/memstore"
	"github.com/nereusstream/nereus-go/stream/provider/memprovider"
)

// TestListingVisitsEveryStreamAcrossPages: over several of eachHead's
// 256-name pages, with owned and unowned streams interleaved, the listing
// visits every live stream exactly once, in name order, each with its own
// head — an owned one with its owner's committed head (ownersOf answers a
// page's lookups in order under one lock) — and reads heads from the store
// only for streams without an owner here.
func TestListingVisitsEveryStreamAcrossPages(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	meta := &opCounter{Store: memstore.New()}
	c, err := Open(ctx, Config{Metadata: meta, ObjectWAL: memprovider.New(1, memprovider.Faults{}), WriterID: "b1",
		RetentionInterval: time.Hour, Lifecycle: LifecycleConfig{GCDisabled: true, DisableMaterialization: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	const streams = 600 // three pages
	ids := make([]ID, streams)
	for i := range streams {
		info, err := c.Create(ctx, fmt.Sprintf("page-%03d", i), CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = info.ID
	}
	// Owned streams commit i%4+1 appends, so a head handed to the wrong
	// stream (or a store head for an owned one: End 0) shows.
	owned := map[int]bool{}
	for i := 0; i < streams; i += 3 {
		s, err := c.AcquireSession(ctx, ids[i], SessionOptions{})
		if err != nil {
			t.Fatal(err)
		}
		owned[i] = true
		for k := range i%4 + 1 {
			if _, err := c.Append(ctx, s, AppendRequest{Entries: []Entry{{Payload: []byte{byte(k)}, RecordCount: 1}}, ExpectedStart: -1}); err != nil {
				t.Fatal(err)
			}
		}
	}

	_, g0, _ := meta.snapshot()
	seen := make([]int, streams)
	var prev string
	err = c.eachHead(ctx, "page-", "", func(l listedStream) bool {
		var i int
		if _, err := fmt.Sscanf(l.info.Name, "page-%d", &i); err != nil || i < 0 || i >= streams {
			t.Fatalf("listed %q", l.info.Name)
		}
		if l.info.Name <= prev {
			t.Fatalf("not in name order: %q after %q", l.info.Name, prev)
		}
		prev = l.info.Name
		seen[i]++
		if l.info.ID != ids[i] || l.h.ID != ids[i] {
			t.Fatalf("%s listed with ID %v / head of %v, want %v", l.info.Name, l.info.ID, l.h.ID, ids[i])
		}
		if l.owned != owned[i] {
			t.Fatalf("%s listed owned=%v, want %v", l.info.Name, l.owned, owned[i])
		}
		want := int64(0)
		if owned[i] {
			want = int64(i%4 + 1)
		}
		if l.info.EndOffset != want {
			t.Fatalf("%s listed End %d, want %d", l.info.Name, l.info.EndOffset, want)
		}
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	_, g1, _ := meta.snapshot()
	for i, n := range seen {
		if n != 1 {
			t.Fatalf("stream %d listed %d times, want once", i, n)
		}
	}
	if reads, want := g1-g0, streams-len(owned); reads != want {
		t.Fatalf("listing made %d head reads, want %d (one per stream without an owner here)", reads, want)
	}
}
