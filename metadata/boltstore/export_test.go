package boltstore

// OpenNoSyncForTest opens a store whose bbolt commits skip fsync: the
// power-cut mutant (crash_test.go). Never for anything but that test.
func OpenNoSyncForTest(path string, opts Options) (*Store, error) {
	opts.testNoSync = true
	return Open(path, opts)
}
