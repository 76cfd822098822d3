package walstore_test

import (
	"testing"

	"github.com/nereusstream/nereus-go/objectstore"
	"github.com/nereusstream/nereus-go/objectstore/objectstoretest"
	"github.com/nereusstream/nereus-go/objectstore/walstore"
)

func openTemp(t testing.TB, opts walstore.Options) *walstore.Store {
	t.Helper()
	s, err := walstore.Open(t.TempDir(), opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	objectstoretest.Run(t, func(t *testing.T) objectstore.ObjectStore { return openTemp(t, walstore.Options{}) })
}

// TestConformanceSmallFiles runs the suite with files so small that most
// objects seal a file and old files are deleted and copied forward while
// the suite runs.
func TestConformanceSmallFiles(t *testing.T) {
	objectstoretest.Run(t, func(t *testing.T) objectstore.ObjectStore {
		return openTemp(t, walstore.Options{FileBytes: 64 << 10, PreallocBytes: 16 << 10, CopyAfter: 1})
	})
}
