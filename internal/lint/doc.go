// Package lint holds the repository's house-rule tests (run by go test like
// any other test, so CI enforces them): every package has a package doc
// comment; the storage layers (stream, metadata, objectstore, wal) never
// import a protocol adapter, the server or a command; only commands import
// the server; library packages never print to stdout; every test skip is an
// environment skip through testenv.SkipOrFail or says why it is not.
//
// It contains no production code and must never be imported.
package lint
