package logstore_test

import (
	"os"
	"strings"
	"testing"

	"github.com/nereusstream/nereus-go/metadata"
	"github.com/nereusstream/nereus-go/metadata/logstore"
	"github.com/nereusstream/nereus-go/metadata/metadatatest"
)

// crashOpts make the helper roll its log and compact many times a round,
// so kills also land inside zero-fills, log switches and snapshots.
var crashOpts = logstore.Options{PreallocBytes: 64 << 10, CompactMinBytes: 32 << 10, CompactRatio: 1}

// crash is the shared kill -9 / power-cut harness (metadatatest.Crash) on
// one store directory; the mutant skips the commit fdatasync.
var crash = metadatatest.Crash{
	Env:  "NEREUS_LOGSTORE_CRASH_HELPER_DIR",
	Name: "crash",
	Open: func(dir string, noSync bool) (metadata.Store, error) {
		if noSync {
			return logstore.OpenNoSyncForTest(dir, crashOpts)
		}
		return logstore.Open(dir, crashOpts)
	},
	Sync:     "the commit fdatasync",
	Describe: func(t testing.TB, dir string) string { return "(files " + listFiles(t, dir) + ")" },
}

// TestCrashHelper is the child process of the crash tests: it writes under
// load and prints every acknowledged write until it is killed.
func TestCrashHelper(t *testing.T) { crash.Helper(t) }

// TestKillNineRecovery: after each of several SIGKILLs of a writing
// process, every acknowledged write is there at its version, the version
// counter moved past everything issued, no ephemeral survived.
func TestKillNineRecovery(t *testing.T) { crash.KillNine(t) }

// TestPowerCutRecovery is TestKillNineRecovery on crashfs with a power cut
// after every kill: only what the store fdatasync'd survives.
func TestPowerCutRecovery(t *testing.T) { crash.PowerCut(t) }

// TestPowerCutCatchesSkippedSync is the mutation check of
// TestPowerCutRecovery: with the commit fdatasync skipped, a power cut
// loses acknowledged writes, and the check must say so.
func TestPowerCutCatchesSkippedSync(t *testing.T) { crash.CatchesSkippedSync(t) }

// listFiles names the store's files (to show that rounds compacted).
func listFiles(t testing.TB, dir string) string {
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, de := range des {
		names = append(names, de.Name())
	}
	return strings.Join(names, " ")
}
