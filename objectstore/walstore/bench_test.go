package walstore_test

import (
	"testing"

	"github.com/nereusstream/nereus-go/objectstore"
	"github.com/nereusstream/nereus-go/objectstore/objectstoretest"
	"github.com/nereusstream/nereus-go/objectstore/walstore"
)

// BenchmarkWALStore: the standard throughput benchmarks.
func BenchmarkWALStore(b *testing.B) {
	objectstoretest.Benchmark(b, func(b *testing.B) objectstore.ObjectStore { return openTemp(b, walstore.Options{}) })
}

// BenchmarkWALSteadyState: the Object WAL's commit and truncation on this
// store; compare with fsstore's of the same name.
//
//	go test -run '^$' -bench WALSteadyState -benchtime 500x ./objectstore/walstore/ ./objectstore/fsstore/
func BenchmarkWALSteadyState(b *testing.B) {
	objectstoretest.WALSteadyState(b, openTemp(b, walstore.Options{}))
}
