package logstore

// OpenNoSyncForTest opens a store whose commits skip fdatasync: the
// power-cut mutant (crash_test.go). Never for anything but that test.
func OpenNoSyncForTest(dir string, opts Options) (*Store, error) {
	opts.testNoSync = true
	return Open(dir, opts)
}
