package fsstore_test

import (
	"testing"

	"github.com/nereusstream/nereus-go/objectstore"
	"github.com/nereusstream/nereus-go/objectstore/objectstoretest"
)

// BenchmarkFSStore measures the filesystem backend with its full durability
// path (fdatasync of every object, fsync of its directory).
func BenchmarkFSStore(b *testing.B) {
	objectstoretest.Benchmark(b, func(b *testing.B) objectstore.ObjectStore { return openTemp(b) })
}
