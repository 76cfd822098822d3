package s3store_test

import (
	"os"
	"testing"

	"github.com/nereusstream/nereus-go/internal/testenv/s3test"
	"github.com/nereusstream/nereus-go/objectstore"
	"github.com/nereusstream/nereus-go/objectstore/objectstoretest"
)

func TestMain(m *testing.M) { os.Exit(s3test.Main(m)) }

func TestConformanceVersitygw(t *testing.T) {
	srv := s3test.Require(t)
	objectstoretest.RunWith(t, func(t *testing.T) objectstore.ObjectStore {
		return srv.NewStore(t)
	}, objectstoretest.Capabilities{ContentDerivedVersions: true, NoObjectPrefixOverlap: true})
}
