package bkwal_test

import (
	"os"
	"testing"

	"github.com/nereusstream/nereus-go/bookkeeper/bktest"
)

// env is a real ZooKeeper + bookies cluster for realbk_test.go (shared with
// other packages when CI started one: this package never kills bookies).
var env bktest.Env

func TestMain(m *testing.M) { os.Exit(env.Main(m)) }
