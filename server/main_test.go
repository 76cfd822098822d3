package server_test

import (
	"os"
	"testing"

	"github.com/nereusstream/nereus-go/internal/testenv/etcdtest"
	"github.com/nereusstream/nereus-go/internal/testenv/s3test"
)

// TestMain stops the shared external servers (versitygw, embedded etcd)
// that tests of this binary started on first use.
func TestMain(m *testing.M) {
	code := s3test.Main(m)
	etcdtest.Stop()
	os.Exit(code)
}
