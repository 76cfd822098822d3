package lifecyclebench

import (
	"context"
	"flag"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/bookkeeper"
	"github.com/nereusstream/nereus-go/bookkeeper/meta"
	"github.com/nereusstream/nereus-go/stream/bkwal"
)

var (
	zkFlag   = flag.String("lcbench.zk", "", "TestSpace: ZooKeeper of the BookKeeper cluster: count the benchmark streams' own ledgers in it (by their stream tag) every sample; works on a shared cluster")
	zkRootFl = flag.String("lcbench.zkroot", "/ledgers", "ledgers root for -lcbench.zk")
)

// zkCounter counts the ledgers in ZooKeeper whose Nereus stream tag names
// one of ids: a walk of the ledgers root (a ledger znode is L<digits>).
type zkCounter struct {
	store *bookkeeper.ZKStore
	ids   map[string]bool
}

func newZKCounter(t *testing.T, ids []string) *zkCounter {
	if *zkFlag == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	store, err := bookkeeper.DialZK(ctx, *zkFlag, bookkeeper.ZKOptions{LedgersRoot: *zkRootFl,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	z := &zkCounter{store: store, ids: map[string]bool{}}
	for _, id := range ids {
		z.ids[id] = true
	}
	return z
}

// zkLedgers is what a walk found: the benchmark streams' ledgers, how
// many of them are not closed (open or in recovery: their length is not
// in ZooKeeper), and the summed length of the closed ones (payload bytes
// per replica: the bookies store each write-quorum times).
type zkLedgers struct {
	n, open, closedBytes int64
}

func (z *zkCounter) count() zkLedgers {
	conn := z.store.Conn()
	var out zkLedgers
	var walk func(path string, depth int)
	walk = func(path string, depth int) {
		if depth > 6 {
			return
		}
		kids, _, err := conn.Children(path)
		if err != nil {
			return
		}
		for _, k := range kids {
			p := path + "/" + k
			if len(k) > 1 && k[0] == 'L' && strings.Trim(k[1:], "0123456789") == "" {
				if data, _, err := conn.Get(p); err == nil {
					if md, err := meta.Unmarshal(data); err == nil && z.ids[string(md.Custom[bkwal.StreamKey])] {
						out.n++
						if md.State == meta.StateClosed {
							out.closedBytes += md.Length
						} else {
							out.open++
						}
					}
				}
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
