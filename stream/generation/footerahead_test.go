package generation

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/nereusstream/nereus-go/objectstore"
	"github.com/nereusstream/nereus-go/objectstore/memstore"
)

// footerStore counts footer GETs (GetRange) and can lose the next n of
// their responses.
type footerStore struct {
	objectstore.ObjectStore
	gets, lose atomic.Int64
}

func (s *footerStore) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	s.gets.Add(1)
	if s.lose.Add(-1) >= 0 {
		return nil, errors.New("lost response")
	}
	s.lose.Store(0)
	return s.ObjectStore.GetRange(ctx, key, off, n)
}

// waitFooters waits until every FooterAhead goroutine of r is done.
func waitFooters(r *Reader) { r.footersAheadWG.Wait() }

// TestFooterAhead: FooterAhead loads a footer that is not cached, so the
// first Read of the object costs no footer GET of its own; on a cached
// footer it starts nothing. A lost response of the load ahead is dropped
// (nothing cached; the Read loads the footer itself and succeeds); a
// corrupt footer (the object at the key is not the one the Info names) is
// never cached, and the Read reports ErrCorrupt.
func TestFooterAhead(t *testing.T) {
	ctx := context.Background()
	fs := &footerStore{ObjectStore: memstore.New()}
	objs := putObjects(t, fs, 3, 31)
	r := NewReader(fs, 1<<20)

	r.FooterAhead(ctx, objs[0].key, objs[0].info)
	waitFooters(r)
	if st := r.Stats(); st.Footers != 1 || st.FootersAhead != 1 {
		t.Fatalf("after FooterAhead: %+v", st)
	}
	gets := fs.gets.Load()
	es, err := r.Read(ctx, objs[0].key, objs[0].info, objs[0].info.Start, 1<<30)
	if err != nil || checkPrefix(es, objs[0].entries, objs[0].info.Start) != nil {
		t.Fatalf("read: %v", err)
	}
	if got := fs.gets.Load() - gets; got != 1 { // the data only
		t.Fatalf("the first Read after FooterAhead made %d GETs, want 1 (no footer GET)", got)
	}
	r.FooterAhead(ctx, objs[0].key, objs[0].info)
	if st := r.Stats(); st.FootersAhead != 1 {
		t.Fatalf("FooterAhead of a cached footer started a load: %+v", st)
	}

	fs.lose.Store(1)
	gets = fs.gets.Load()
	r.FooterAhead(ctx, objs[1].key, objs[1].info)
	waitFooters(r)
	if st := r.Stats(); st.Footers != 1 || fs.gets.Load() != gets+1 {
		t.Fatalf("a lost footer load was cached, or none was tried: %+v, %d GETs", st, fs.gets.Load()-gets)
	}
	es, err = r.Read(ctx, objs[1].key, objs[1].info, objs[1].info.Start, 1<<30)
	if err != nil || checkPrefix(es, objs[1].entries, objs[1].info.Start) != nil {
		t.Fatalf("read after a lost footer load: %v", err)
	}

	other, _, _ := fs.Get(ctx, objs[0].key)
	if _, err := fs.Put(ctx, objs[2].key, other, objectstore.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	r.FooterAhead(ctx, objs[2].key, objs[2].info)
	waitFooters(r)
	r.mu.Lock()
	_, cached := r.items[objs[2].key]
	r.mu.Unlock()
	if cached {
		t.Fatal("a footer that failed its check was cached")
	}
	_, err = r.Read(ctx, objs[2].key, objs[2].info, objs[2].info.Start, 1<<30)
	mustCorrupt(t, "replaced object after FooterAhead", err)
}
