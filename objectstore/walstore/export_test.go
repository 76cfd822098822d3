package walstore

// CrashSteps are the steps crashPoint reports.
var CrashSteps = []string{"written", "flushed", "sealed", "created", "copied", "delete", "deleted"}

// SetCrashHookForTest installs fn to be called at each named step (nil
// removes it). Call it before Open.
func SetCrashHookForTest(fn func(step string)) { crashHook = fn }

// SetMutantForTest makes this test binary's stores skip one durability
// step: "no-flush-wait" (a Put returns before its flush), "seal-no-sync"
// (a file is sealed without its fdatasync), "delete-no-flush" (a file is
// deleted before what killed its objects is durable); "" restores them.
func SetMutantForTest(name string) {
	switch name {
	case "", "no-flush-wait", "seal-no-sync", "delete-no-flush":
		mutant = name
	default:
		panic("walstore: unknown mutant " + name)
	}
}
