package logstore_test

import (
	"testing"

	"github.com/nereusstream/nereus-go/metadata"
	"github.com/nereusstream/nereus-go/metadata/logstore"
	"github.com/nereusstream/nereus-go/metadata/metadatatest"
)

func TestConformance(t *testing.T) {
	metadatatest.Run(t, func(t *testing.T) metadata.Store {
		s, err := logstore.Open(t.TempDir(), logstore.Options{PreallocBytes: 64 << 10})
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}
