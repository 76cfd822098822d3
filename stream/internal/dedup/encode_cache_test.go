package dedup

import (
	"bytes"
	"testing"
)

// TestEncodingCacheFollowsChanges: the cached encoding is what a fresh
// encode gives, before and after every change, and in clones.
func TestEncodingCacheFollowsChanges(t *testing.T) {
	tb := New()
	fresh := func(x *Table) []byte { return x.appendEncode(nil) }
	for i := int64(0); i < 20; i++ {
		tb.Record("p"+string(rune('a'+i%7)), 1, Batch{FirstSeq: i * 10, LastSeq: i*10 + 9, Start: i, End: i + 1})
		first := tb.AppendEncode(nil)
		if !bytes.Equal(first, fresh(tb)) || !bytes.Equal(tb.AppendEncode([]byte{9})[1:], first) {
			t.Fatalf("after record %d: cached encoding differs from a fresh one", i)
		}
		c := tb.Clone()
		if !bytes.Equal(c.AppendEncode(nil), first) {
			t.Fatal("clone encodes differently")
		}
		c.Record("other", 1, Batch{FirstSeq: 0, LastSeq: 0})
		if bytes.Equal(c.AppendEncode(nil), first) || !bytes.Equal(c.AppendEncode(nil), fresh(c)) {
			t.Fatal("a changed clone kept the stale encoding")
		}
		if !bytes.Equal(tb.AppendEncode(nil), first) {
			t.Fatal("changing a clone changed the original's encoding")
		}
		d, n, err := Decode(first)
		if err != nil || n != len(first) || !bytes.Equal(d.AppendEncode(nil), first) {
			t.Fatalf("decode: %v", err)
		}
	}
}
