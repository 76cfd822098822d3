package logstore

import (
	"github.com/google/btree"

	"github.com/nereusstream/nereus-go/metadata"
)

// entry is one live record. Entries are immutable once in a tree: a write
// replaces the entry, so a published tree never changes under a reader.
type entry struct {
	key     string
	version metadata.Version
	session metadata.SessionID // 0: persistent (logged); else ephemeral (not logged)
	value   []byte
}

func (e *entry) record() metadata.Record {
	return metadata.Record{Key: e.key, Value: append([]byte{}, e.value...), Version: e.version, Session: e.session}
}

// liveBytes is what a persistent entry costs in a snapshot.
func (e *entry) liveBytes() int64 {
	if e.session != 0 {
		return 0
	}
	return int64(recordHeaderSize + len(e.key) + len(e.value))
}

// item is what the tree holds: the key beside the entry pointer, so the
// ~15 comparisons of a descent read only the key bytes. With the tree of
// *entry each comparison first loaded the entry for its key header, then
// the bytes: two dependent cache misses per comparison, ~2.2 µs per head CAS
// once the tree outgrew the cache (10,000 streams). item.key is always
// item.e.key; a probe (Get, Delete, range bounds) carries a nil e.
type item struct {
	key string
	e   *entry
}

func lessItem(a, b item) bool { return a.key < b.key }

// tree is the ordered key space. The committer owns one working tree and
// publishes a copy-on-write Clone of it after every commit; readers only
// ever see published clones, which nothing writes again.
type tree = btree.BTreeG[item]

const treeDegree = 32

func newTree() *tree { return btree.NewG[item](treeDegree, lessItem) }

func lookup(t *tree, key string) (*entry, bool) {
	it, ok := t.Get(item{key: key})
	return it.e, ok
}

// insert puts e in t, replacing the entry of the same key if any.
func insert(t *tree, e *entry) { t.ReplaceOrInsert(item{key: e.key, e: e}) }

// remove deletes key's entry from t, if any.
func remove(t *tree, key string) { t.Delete(item{key: key}) }

// ascend calls fn for every entry in key order until fn returns false.
func ascend(t *tree, fn func(*entry) bool) {
	t.Ascend(func(it item) bool { return fn(it.e) })
}
