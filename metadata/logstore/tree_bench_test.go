package logstore

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

func benchKeys(n int) []string {
	ks := make([]string, n)
	for i := range ks {
		ks[i] = fmt.Sprintf("/nereus/streams/%08d/head", i*7919%n)
	}
	return ks
}

// BenchmarkTreeLookup: random exact-key lookups in a tree of 200,000
// keys sharing a 16-byte prefix, larger than the caches, the shape of the
// commit path's lookups at 10,000+ streams (heads, names, index records).
//
//	go test -run '^$' -bench TreeLookup -benchtime 1000000x ./metadata/logstore/
const treeBenchKeys = 200000

func BenchmarkTreeLookup(b *testing.B) {
	ks := benchKeys(treeBenchKeys)
	t := newTree()
	for _, k := range ks {
		insert(t, &entry{key: k, value: make([]byte, 200)})
	}
	r := rand.New(rand.NewPCG(1, 2))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		k := ks[r.IntN(len(ks))]
		if _, ok := lookup(t, k); !ok {
			b.Fatal(k)
		}
	}
}
