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

func lessEntry(a, b *entry) bool { return a.key < b.key }

// tree is the ordered key space. The committer owns one working tree and
// publishes a copy-on-write Clone of it after every commit; readers only
// ever see published clones, which nothing writes again.
type tree = btree.BTreeG[*entry]

const treeDegree = 32

func newTree() *tree { return btree.NewG[*entry](treeDegree, lessEntry) }

func lookup(t *tree, key string) (*entry, bool) { return t.Get(&entry{key: key}) }
