// Package bookkeeper is a Go client for Apache BookKeeper that speaks the
// bookies' own v2 binary protocol and keeps ledger metadata in ZooKeeper in
// BookKeeper's own format (v3) and path layout, so ledgers it writes are
// read by BookKeeper's Java tools and clients and vice versa. It depends on
// nothing else in Nereus.
//
// It owns: the bookie connections (one per bookie, pipelined, correlated by
// (op, ledger, entry)); ledger creation with caller-chosen IDs; pipelined
// adds to the write quorum, acknowledged at the ack quorum in entry order;
// close; non-recovery reads with the piggybacked LAC; recovery (fence,
// recover the tail, close); and delete guarded by the metadata version.
//
// It must never: write an entry (or a fencing read, which creates the
// ledger on a bookie) before the ledger's metadata exists, because bookies
// garbage-collect ledgers missing from metadata; fence a ledger outside
// RecoverLedger; acknowledge an add before its ack quorum and every earlier
// add; resend an add with different bytes; reuse a ledger ID; or guess an
// unknown outcome.
//
// # Outcomes
//
// Every operation that writes documents its closed outcome set: applied,
// not applied, conflict or unknown (Classify). Unknown store answers
// (ZooKeeper connection loss during a create or a CAS) are settled inside
// the operation by a linearizable re-read — a create by its random cToken,
// a CAS by comparing the stored bytes — and reported as ErrOutcomeUnknown
// only when the context ends first. An add that was not acknowledged is
// settled by the ledger's close: it is applied iff its entry ID is at most
// the lastEntryId the ledger is closed with, by Writer.Close or by a
// recovery.
//
//	operation        applied             not applied                     conflict                   unknown
//	CreateLedger     nil                 ErrInvalidArgument,             ErrLedgerExists            *CreateUnknownError
//	                                     ErrNotEnoughBookies
//	AppendAsync      (accepted)          any error                       -                          -
//	AddFuture.Err    nil                 ErrLedgerClosed                 -                          *AddError
//	Writer.Close     nil                 -                               ErrFenced (result settles  ErrOutcomeUnknown
//	                                                                     adds if closed)
//	RecoverLedger    reader (CLOSED)     ErrRecoveryIncomplete (retry)   -                          ErrOutcomeUnknown
//	DeleteLedger     nil                 ErrNoSuchLedger                 ErrBadVersion              ErrOutcomeUnknown
//
// # What is not implemented
//
// No ensemble change: a bookie failure is retried on the same bookie until
// AddTimeout, then the writer breaks and the caller rolls over to a new
// ledger (with E = WQ > AQ a single dead bookie does not stop the writer).
// No v3 protocol, hence no explicit LAC or long-poll: readers of an open
// ledger see entries up to the piggybacked LAC. No generated ledger IDs:
// every ledger is created with an explicit ID. No TLS or authentication
// plugins (the bookies' default).
//
// The wire codec, digests and master key are in package proto; the
// metadata encoding and paths in package meta; an in-process fake bookie
// and metadata store for tests in package bkfake.
package bookkeeper
