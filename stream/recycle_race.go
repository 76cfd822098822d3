//go:build race

package stream

// poisonReleasedEntries: under the race detector (every CI test run and the
// nereus serve binaries those tests start) a released read's Entries are
// overwritten at once (offset -1, no payload), so a caller still using them
// after Release — the slice is recycled for the next read — fails visibly
// instead of rarely in production. See generation's poisonOnRelease.
const poisonReleasedEntries = true
