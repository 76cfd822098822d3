// Package testenv holds the rules every test that depends on its
// environment follows: when something outside the test is missing (a tool,
// a service, a privilege), SkipOrFail skips the test — or fails it when
// NEREUS_REQUIRE_EXTERNAL=1, so CI can never pass a missing install step or
// service as a skip; and a child process a test starts dies with the test
// binary (ChildProcAttr).
//
// Its subpackages run real services for tests: s3test (versitygw), etcdtest
// (embedded etcd), acklog (the acknowledged-write ledger crash tests check
// against).
//
// It must never be imported by non-test code. internal/lint checks that
// every t.Skip in the module goes through SkipOrFail or carries a
// "// skip-ok: <reason>" comment saying why it is not an environment skip.
package testenv

import (
	"fmt"
	"os"
	"testing"
)

// EnvRequireExternal names the variable that turns environment skips into
// failures ("1"; scripts/test.sh and CI set it).
const EnvRequireExternal = "NEREUS_REQUIRE_EXTERNAL"

// RequireExternal reports whether NEREUS_REQUIRE_EXTERNAL=1.
func RequireExternal() bool { return os.Getenv(EnvRequireExternal) == "1" }

// SkipOrFail ends tb because something in its environment is missing: a
// skip normally, a failure when NEREUS_REQUIRE_EXTERNAL=1. The message
// should say what is missing and how to provide it.
func SkipOrFail(tb testing.TB, format string, args ...any) {
	tb.Helper()
	msg := fmt.Sprintf(format, args...)
	if RequireExternal() {
		tb.Fatalf("%s (and %s=1 makes a missing environment a failure)", msg, EnvRequireExternal)
	}
	tb.Skipf("%s (set %s=1 to make this a failure)", msg, EnvRequireExternal)
}
