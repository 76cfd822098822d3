package stream_test

import (
	"sync"
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/metadata/memstore"
	"github.com/nereusstream/nereus-go/stream"
	"github.com/nereusstream/nereus-go/stream/provider/memprovider"
)

// hintingProvider records the retention hints the core gives it.
type hintingProvider struct {
	*memprovider.Provider
	mu    sync.Mutex
	hints map[uint64]time.Duration
}

func (h *hintingProvider) HintRetention(stream uint64, r time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.hints[stream] = r
}

func (h *hintingProvider) hint(id stream.ID) (time.Duration, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	r, ok := h.hints[uint64(id)]
	return r, ok
}

// The core's background retention pass hands every owned stream's time
// retention to a provider that takes hints (provider.RetentionHinter), 0
// for a stream without one and once a stream's time retention is removed.
// Fails with the hint call taken out of the pass (no hint ever arrives).
func TestRetentionPassHintsTheProvider(t *testing.T) {
	hp := &hintingProvider{Provider: memprovider.New(1, memprovider.Faults{}), hints: map[uint64]time.Duration{}}
	c, err := stream.Open(ctxT(t), stream.Config{Metadata: memstore.New(), ObjectWAL: hp, WriterID: "b1",
		RetentionInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	ctx := ctxT(t)
	a, err := c.Create(ctx, "short", stream.CreateOptions{Retention: stream.Retention{Time: 3 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Create(ctx, "forever", stream.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitHint := func(what string, id stream.ID, want time.Duration) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			if r, ok := hp.hint(id); ok && r == want {
				return
			}
			if time.Now().After(deadline) {
				r, ok := hp.hint(id)
				t.Fatalf("%s: hint %v (given: %v), want %v", what, r, ok, want)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitHint("a stream with a 3s retention", a.ID, 3*time.Second)
	waitHint("a stream without retention", b.ID, 0)
	if err := c.SetRetention(ctx, a.ID, stream.Retention{Bytes: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	waitHint("after the time retention was removed", a.ID, 0)
}
