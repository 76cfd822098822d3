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
	default:
		panic("fsstore: unknown sync mutant " + name)
	}
}
