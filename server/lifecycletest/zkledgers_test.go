package lifecycletest

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

// zkLedgers counts, from outside the server, the BookKeeper ledgers in
// ZooKeeper whose Nereus stream tag names one of the stream IDs: a walk of
// the ledgers root (both layouts: a ledger znode is named L<digits>).
type zkLedgers struct {
	store *bookkeeper.ZKStore
}

func (e *lc) zk(t *testing.T) *zkLedgers {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	store, err := bookkeeper.DialZK(ctx, bk.ZK, bookkeeper.ZKOptions{LedgersRoot: bk.Root,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	return &zkLedgers{store: store}
}

// count returns, per stream ID, how many ledgers carry its tag.
func (z *zkLedgers) count(t *testing.T, ids ...string) map[string]int {
	t.Helper()
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
