package memstore_test

import (
	"testing"

	"github.com/nereusstream/nereus-go/objectstore"
	"github.com/nereusstream/nereus-go/objectstore/memstore"
	"github.com/nereusstream/nereus-go/objectstore/objectstoretest"
)

func BenchmarkMemStore(b *testing.B) {
	objectstoretest.Benchmark(b, func(b *testing.B) objectstore.ObjectStore { return memstore.New() })
}
