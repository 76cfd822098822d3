//go:build race

package generation

// poisonOnRelease: under the race detector (every CI test run, and the
// nereus serve binaries those tests start) a released span buffer is
// overwritten at once, so a payload still used after its Release — bytes
// verified, then overwritten by the next read before a socket write
// finished — shows as junk that clients' batch CRCs and the tests' byte
// comparisons catch, instead of as a rare race in production.
const poisonOnRelease = true
