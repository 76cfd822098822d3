// Package bkfake provides in-process fakes of a BookKeeper cluster for
// tests: Bookie, a TCP server speaking the bookie v2 protocol with the
// server-side semantics the client depends on (master-key binding and EUA,
// fencing and EFENCED, recovery adds, last-entry reads, ENOLEDGER/ENOENTRY),
// and MetaStore, an in-memory bookkeeper.MetadataStore. Both inject faults:
// dropped, delayed or rewritten answers, corrupted entries, killed bookies,
// metadata writes whose answer is lost before or after they applied.
//
// Tests only. It must never be used where data must survive, and it is
// never a substitute for the real-bookie tests: it proves the client
// against the semantics as understood, not against BookKeeper itself.
package bkfake
