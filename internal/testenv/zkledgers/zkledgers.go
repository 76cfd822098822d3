// Package zkledgers counts, from outside a server, the BookKeeper ledgers
// in ZooKeeper that belong to Nereus streams: a walk of the ledgers root
// (both hierarchical layouts: a ledger znode is named L<digits>) reading
// each ledger's metadata for the stream tag the BookKeeper WAL writes
// (bkwal.StreamKey). Tests only; it owns no product code and never writes.
package zkledgers

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/bookkeeper"
	"github.com/nereusstream/nereus-go/bookkeeper/meta"
	"github.com/nereusstream/nereus-go/stream/bkwal"
)

// Counter is a ZooKeeper session on one ledgers root.
type Counter struct {
	store *bookkeeper.ZKStore
}

// Dial connects to zk (a connect string) at the ledgers root; the session
// is closed when tb ends.
func Dial(tb testing.TB, zk, root string) *Counter {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	store, err := bookkeeper.DialZK(ctx, zk, bookkeeper.ZKOptions{LedgersRoot: root,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = store.Close() })
	return &Counter{store: store}
}

// Count returns, per stream ID, how many ledgers carry its tag (IDs with
// none are absent from the map).
func (z *Counter) Count(tb testing.TB, ids ...string) map[string]int {
	tb.Helper()
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	out := map[string]int{}
	conn := z.store.Conn()
	var walk func(path string, depth int)
	walk = func(path string, depth int) {
		if depth > 6 {
			return
		}
		kids, _, err := conn.Children(path)
		if err != nil {
			return // deleted meanwhile
		}
		for _, k := range kids {
			p := path + "/" + k
			if len(k) > 1 && k[0] == 'L' && strings.Trim(k[1:], "0123456789") == "" {
				data, _, err := conn.Get(p)
				if err != nil {
					continue
				}
				md, err := meta.Unmarshal(data)
				if err != nil {
					continue
				}
				if s := string(md.Custom[bkwal.StreamKey]); want[s] {
					out[s]++
				}
				continue
			}
			if depth == 0 && (k == "available" || k == "underreplication" || k == "LAYOUT" || k == "INSTANCEID" || k == "idgen") {
				continue
			}
			if strings.Trim(k, "0123456789") == "" {
				walk(p, depth+1)
			}
		}
	}
	walk(z.store.Root(), 0)
	return out
}

// Total is the number of ledgers of all of ids.
func (z *Counter) Total(tb testing.TB, ids ...string) int {
	tb.Helper()
	n := 0
	for _, c := range z.Count(tb, ids...) {
		n += c
	}
	return n
}
