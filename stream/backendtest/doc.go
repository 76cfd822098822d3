// Package backendtest runs the whole stream core on the stores a multi-node
// deployment uses: the Object WAL on S3 (versitygw, through
// internal/testenv/s3test) and the metadata on etcd (embedded, through
// internal/testenv/etcdtest), alone and together, with several cores
// ("nodes") sharing them.
//
// It holds tests only. It must never be imported, and it must never test
// what the per-package conformance suites already cover (the store
// contracts): its subject is the core's behaviour on real backends —
// commit, cross-node reads through the index with no tail cache, head
// watches across clients, and recovery on restart.
package backendtest
