package boltstore_test

import (
	"testing"

	"github.com/nereusstream/nereus-go/metadata"
	"github.com/nereusstream/nereus-go/metadata/boltstore"
	"github.com/nereusstream/nereus-go/metadata/metadatatest"
)

// crash is the shared kill -9 / power-cut harness (metadatatest.Crash) on
// one bbolt file; the mutant skips bbolt's commit fsync (NoSync).
var crash = metadatatest.Crash{
	Env:  "NEREUS_BOLTSTORE_CRASH_HELPER_DB",
	Name: "crash.db",
	Open: func(path string, noSync bool) (metadata.Store, error) {
		if noSync {
			return boltstore.OpenNoSyncForTest(path, boltstore.Options{})
		}
		return boltstore.Open(path, boltstore.Options{})
	},
	Sync: "bbolt's fsync",
}

// TestCrashHelper is the child process of the crash tests: it writes under
// load and prints every acknowledged write until it is killed.
func TestCrashHelper(t *testing.T) { crash.Helper(t) }

// TestKillNineRecovery: after each of several SIGKILLs of a writing
// process, every acknowledged write is there at its version, the version
// counter moved past everything issued, no ephemeral survived.
func TestKillNineRecovery(t *testing.T) { crash.KillNine(t) }

// TestPowerCutRecovery is TestKillNineRecovery on crashfs with a power cut
// after every kill: only what bbolt fsync'd survives.
func TestPowerCutRecovery(t *testing.T) { crash.PowerCut(t) }

// TestPowerCutCatchesSkippedSync is the mutation check of
// TestPowerCutRecovery: with bbolt's commit fsync skipped (NoSync), a power
// cut loses acknowledged writes, and the check must say so.
func TestPowerCutCatchesSkippedSync(t *testing.T) { crash.CatchesSkippedSync(t) }
