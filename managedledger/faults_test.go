package managedledger

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/nereusstream/nereus-go/metadata"
	"github.com/nereusstream/nereus-go/metadata/memstore"
	"github.com/nereusstream/nereus-go/stream/streammem"
)

// faultyStore wraps a metadata store and, for keys with a given prefix,
// makes Puts fail in the two ambiguous ways a real store can: the write is
// applied but the answer is lost (unknown outcome), or it is not applied and
// the store is unreachable.
type faultyStore struct {
	metadata.Store
	mu      sync.Mutex
	prefix  string
	plan    []string // "lost-ack" | "down" | "ok", consumed per Put
	applied int
}

func (f *faultyStore) Put(ctx context.Context, key string, value []byte, expected metadata.Version) (metadata.Version, error) {
	f.mu.Lock()
	step := "ok"
	if strings.HasPrefix(key, f.prefix) && len(f.plan) > 0 {
		step, f.plan = f.plan[0], f.plan[1:]
	}
	f.mu.Unlock()
	switch step {
	case "down":
		return 0, fmt.Errorf("%w: connection refused", metadata.ErrUnavailable)
	case "lost-ack":
		if _, err := f.Store.Put(ctx, key, value, expected); err != nil {
			return 0, err
		}
		f.mu.Lock()
		f.applied++
		f.mu.Unlock()
		return 0, fmt.Errorf("%w: response lost", metadata.ErrUnavailable)
	}
	return f.Store.Put(ctx, key, value, expected)
}

// TestCursorFlushUnknownOutcomes: a flush whose write applied but whose
// answer was lost, and one that was not applied, both settle by re-reading
// and never lose or resurrect acknowledgements.
func TestCursorFlushUnknownOutcomes(t *testing.T) {
	ctx := context.Background()
	fs := &faultyStore{Store: memstore.New(), prefix: keyCursors}
	f := NewFactory(streammem.New(), fs, Config{WriterID: "b", AuthorityEpoch: 1})
	if err := f.EnsureDefaults(ctx); err != nil {
		t.Fatal(err)
	}
	name, _ := ParseTopicName("faults")
	l, err := f.Open(ctx, name, true)
	if err != nil {
		t.Fatal(err)
	}
	c, _, err := l.OpenCursor(ctx, "s", func() (int64, error) { return 0, nil })
	if err != nil {
		t.Fatal(err)
	}
	c.AckEntry(0, 1)
	c.AckEntry(2, 1)
	fs.plan = []string{"lost-ack"} // applied, answer lost: Flush must re-read and settle
	if err := c.Flush(ctx); err != nil {
		t.Fatalf("flush after a lost answer: %v", err)
	}
	if fs.applied != 1 {
		t.Fatalf("fault not injected")
	}
	c.AckEntry(1, 1)
	fs.plan = []string{"down", "down"} // not applied twice, then ok
	if err := c.Flush(ctx); err != nil {
		t.Fatalf("flush after outages: %v", err)
	}
	reload, _, err := l.OpenCursor(ctx, "s", nil)
	if err != nil {
		t.Fatal(err)
	}
	if reload.AckedBelow() != 3 {
		t.Fatalf("persisted state %+v, want everything below 3 acknowledged", reload.Snapshot())
	}
	// A flush that cannot settle before its context ends reports it.
	c.AckEntry(5, 1)
	fs.plan = []string{"down"}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := c.Flush(cctx); err == nil {
		t.Fatal("flush with a dead context and a down store reported success")
	}
}
