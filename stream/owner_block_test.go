package stream

import (
	"context"
	"testing"
	"time"
	"unsafe"

	"github.com/nereusstream/nereus-go/metadata/memstore"
	"github.com/nereusstream/nereus-go/stream/provider/memprovider"
)

// TestOwnerIsOneBlock: an owner, its commit machine and the machine's two
// effect batches are one allocation (ownerBlock), and stay so through
// appends (takeReady / recycleReady swap the batches, never replace them).
func TestOwnerIsOneBlock(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := Open(ctx, Config{Metadata: memstore.New(), ObjectWAL: memprovider.New(1, memprovider.Faults{}), WriterID: "b1",
		RetentionInterval: time.Hour, Lifecycle: LifecycleConfig{GCDisabled: true, DisableMaterialization: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	info, err := c.Create(ctx, "block", CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.AcquireSession(ctx, info.ID, SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	check := func(when string) {
		o := c.owner(info.ID)
		if o == nil {
			t.Fatalf("%s: no owner", when)
		}
		o.mu.Lock()
		defer o.mu.Unlock()
		b := (*ownerBlock)(unsafe.Pointer(o))
		if o.m != &b.m {
			t.Fatalf("%s: the machine is not in the owner's block", when)
		}
		rd, spare := o.m.rd, o.m.spare
		if !(rd == &b.ready[0] && spare == &b.ready[1] || rd == &b.ready[1] && spare == &b.ready[0]) {
			t.Fatalf("%s: the effect batches are not in the owner's block", when)
		}
	}
	check("after AcquireSession")
	for k := range 20 {
		if _, err := c.Append(ctx, s, AppendRequest{Entries: []Entry{{Payload: []byte{byte(k)}, RecordCount: 1}}, ExpectedStart: -1}); err != nil {
			t.Fatal(err)
		}
	}
	check("after 20 appends")
}
