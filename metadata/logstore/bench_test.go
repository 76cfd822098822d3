package logstore_test

import (
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/metadata"
	"github.com/nereusstream/nereus-go/metadata/logstore"
	"github.com/nereusstream/nereus-go/metadata/metadatatest"
)

// Benchmarks (metadatatest's, shared with boltstore) run on a store
// directory under the test's temp dir with real fdatasync.
//
//	go test -run '^$' -bench . -benchtime 2000x ./metadata/logstore/

// benchStore adds the committer counters (metadatatest.CommitCounter).
type benchStore struct{ *logstore.Store }

func (s benchStore) CommitStats() (ops, commits int64) {
	st := s.Stats()
	return st.Ops, st.Commits
}

func openBench(b *testing.B, maxBatchDelay time.Duration) metadata.Store {
	b.Helper()
	s, err := logstore.Open(b.TempDir(), logstore.Options{MaxBatchDelay: maxBatchDelay})
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
