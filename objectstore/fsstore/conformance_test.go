package fsstore_test

import (
	"testing"

	"github.com/nereusstream/nereus-go/objectstore"
	"github.com/nereusstream/nereus-go/objectstore/fsstore"
	"github.com/nereusstream/nereus-go/objectstore/objectstoretest"
)

func openTemp(t testing.TB) *fsstore.Store {
	t.Helper()
	s, err := fsstore.Open(t.TempDir())
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	objectstoretest.Run(t, func(t *testing.T) objectstore.ObjectStore { return openTemp(t) })
}
