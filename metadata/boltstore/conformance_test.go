package boltstore_test

import (
	"path/filepath"
	"testing"

	"github.com/nereusstream/nereus-go/metadata"
	"github.com/nereusstream/nereus-go/metadata/boltstore"
	"github.com/nereusstream/nereus-go/metadata/metadatatest"
)

func TestConformance(t *testing.T) {
	metadatatest.Run(t, func(t *testing.T) metadata.Store {
		s, err := boltstore.Open(filepath.Join(t.TempDir(), "meta.db"), boltstore.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}
