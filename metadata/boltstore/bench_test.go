package boltstore_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/metadata"
	"github.com/nereusstream/nereus-go/metadata/boltstore"
	"github.com/nereusstream/nereus-go/metadata/metadatatest"
)

// Benchmarks (metadatatest's, shared with logstore) run on a file under
// the test's temp dir with real fsync.
//
//	go test -run '^$' -bench . -benchtime 2000x ./metadata/boltstore/

// benchStore adds the committer counters (metadatatest.CommitCounter).
type benchStore struct{ *boltstore.Store }

func (s benchStore) CommitStats() (ops, commits int64) {
	st := s.Stats()
	return st.Ops, st.Commits
}

func openBench(b *testing.B, maxBatchDelay time.Duration) metadata.Store {
	b.Helper()
	s, err := boltstore.Open(filepath.Join(b.TempDir(), "bench.db"), boltstore.Options{MaxBatchDelay: maxBatchDelay})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	return benchStore{s}
}

func BenchmarkCASSequential(b *testing.B)   { metadatatest.BenchCASSequential(b, openBench) }
func BenchmarkCASConcurrent64(b *testing.B) { metadatatest.BenchCASConcurrent64(b, openBench) }
func BenchmarkBatchCAS(b *testing.B)        { metadatatest.BenchBatchCAS(b, openBench) }
func BenchmarkHeadRounds(b *testing.B)      { metadatatest.BenchHeadRounds(b, openBench) }
