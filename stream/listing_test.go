package stream

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/metadata/memstore"
	"github.com/nereusstream/nereus-go/stream/provider/memprovider"
)

// TestListingReadsOnlyHeadsWithoutOwner: the listing behind List and the
// periodic passes reads a head from the store only for streams without an
// owner in this process; owned streams are listed from their owner's
// committed head (fresh, in name order with the others), and deleted ones
// are left out either way.
func TestListingReadsOnlyHeadsWithoutOwner(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	meta := &opCounter{Store: memstore.New()}
	c, err := Open(ctx, Config{Metadata: meta, ObjectWAL: memprovider.New(1, memprovider.Faults{}), WriterID: "b1",
		RetentionInterval: time.Hour, Lifecycle: LifecycleConfig{GCDisabled: true, DisableMaterialization: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	const streams = 40
	var ids []ID
	for i := range streams {
		info, err := c.Create(ctx, fmt.Sprintf("list-%02d", i), CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, info.ID)
	}
	owned := 0
	for i := 0; i < streams; i += 2 {
		s, err := c.AcquireSession(ctx, ids[i], SessionOptions{})
		if err != nil {
			t.Fatal(err)
		}
		owned++
		for k := range i % 5 {
			if _, err := c.Append(ctx, s, AppendRequest{Entries: []Entry{{Payload: []byte{byte(k)}, RecordCount: 1}}, ExpectedStart: -1}); err != nil {
				t.Fatal(err)
			}
		}
	}
	// One owned and one unowned stream deleted: neither is listed.
	for _, i := range []int{4, 7} {
		if err := c.Delete(ctx, ids[i]); err != nil {
			t.Fatal(err)
		}
	}
	unownedLive := 0
	for i := 0; i < streams; i++ {
		if c.owner(ids[i]) == nil && i != 7 {
			unownedLive++
		}
	}

	_, g0, _ := meta.snapshot()
	got, err := c.List(ctx, "list-", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	_, g1, _ := meta.snapshot()
	if want := streams - 2; len(got) != want {
		t.Fatalf("listed %d streams, want %d", len(got), want)
	}
	for k := 1; k < len(got); k++ {
		if got[k-1].Name >= got[k].Name {
			t.Fatalf("not in name order: %q before %q", got[k-1].Name, got[k].Name)
		}
	}
	for _, in := range got {
		if in.ID == ids[4] || in.ID == ids[7] {
			t.Fatalf("deleted stream %s listed", in.Name)
		}
		var i int
		if _, err := fmt.Sscanf(in.Name, "list-%d", &i); err != nil {
			t.Fatal(err)
		}
		if want := int64(0); i%2 == 0 {
			want = int64(i % 5)
			if in.EndOffset != want {
				t.Fatalf("%s: listed End %d, the owner committed %d", in.Name, in.EndOffset, want)
			}
		} else if in.EndOffset != want {
			t.Fatalf("%s: End %d, want %d", in.Name, in.EndOffset, want)
		}
	}
	// Heads deleted streams left behind may be read; owned live ones never.
	if reads := g1 - g0; reads > unownedLive+1 {
		t.Fatalf("listing made %d head reads; only the %d streams without an owner here (+1 deleted) need one", reads, unownedLive)
	}
	t.Logf("%d streams listed, %d owned here, %d head reads", len(got), owned, g1-g0)
}
