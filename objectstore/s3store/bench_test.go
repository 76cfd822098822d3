package s3store_test

import (
	"testing"

	"github.com/nereusstream/nereus-go/internal/testenv/s3test"
	"github.com/nereusstream/nereus-go/objectstore"
	"github.com/nereusstream/nereus-go/objectstore/objectstoretest"
)

// BenchmarkS3StoreVersitygw measures s3store against a local versitygw
// (loopback HTTP, posix backend without fsync).
func BenchmarkS3StoreVersitygw(b *testing.B) {
	srv := s3test.Require(b)
	objectstoretest.Benchmark(b, func(b *testing.B) objectstore.ObjectStore { return srv.NewStore(b) })
}
