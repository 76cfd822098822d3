package memstore_test

import (
	"testing"

	"github.com/nereusstream/nereus-go/metadata"
	"github.com/nereusstream/nereus-go/metadata/memstore"
	"github.com/nereusstream/nereus-go/metadata/metadatatest"
)

func TestConformance(t *testing.T) {
	metadatatest.Run(t, func(t *testing.T) metadata.Store { return memstore.New() })
}
