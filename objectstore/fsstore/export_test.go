package fsstore

// SetSyncMutantForTest makes this test binary's stores skip one fsync of
// the publication protocol ("temp-sync" or "publish-dir-sync"; "" restores
// it), for the power-cut mutant test.
func SetSyncMutantForTest(name string) {
	switch name {
	case "":
		syncMutant = mutantNone
	case "temp-sync":
		syncMutant = mutantSkipTempSync
	case "publish-dir-sync":
		syncMutant = mutantSkipPublishDir
	case "deferred-sync":
		syncMutant = mutantSkipDeferredSync
	default:
		panic("fsstore: unknown sync mutant " + name)
	}
}

// SetCrashHookForTest installs fn to be called at each named step of the
// publication protocol (crashPoint), for the power-cut test's writer
// process; nil removes it. Call it before Open.
func SetCrashHookForTest(fn func(step string)) { crashHook = fn }

// CrashSteps are the step names crashPoint reports, in protocol order.
var CrashSteps = []string{"temp-created", "temp-written", "temp-synced", "retired", "renamed", "published", "unlinked", "recycled", "released"}

// SetRecycleLimitForTest sets how many retired inodes a Store opened after
// the call keeps for reuse (0: every retired inode is freed, as before
// recycling); -1 restores the default.
func SetRecycleLimitForTest(n int) {
	recycleLimit = n
}
