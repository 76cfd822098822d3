// Package integration holds the Go BookKeeper client's tests and
// benchmarks against real bookies and a real ZooKeeper (started once for
// the package by scripts/bookkeeper-env.sh through bktest), including the
// compatibility proofs in both directions against BookKeeper's own Java
// client and shell. It has no non-test code and must never be imported.
//
//	go test ./bookkeeper/integration/                  # skips without Java/Maven
//	NEREUS_REQUIRE_EXTERNAL=1 go test ./bookkeeper/integration/
//	go test -run XXX -bench . -benchtime 5s ./bookkeeper/integration/
package integration
