// Package namespace is Nereus's reserved ledger-ID namespace on a BookKeeper
// cluster: one block of 2^40 consecutive ledger IDs in the upper half of the
// positive 63-bit space, claimed by one Nereus deployment, with a proof
// persisted in the Nereus metadata store and a marker in the BookKeeper
// cluster's own ZooKeeper tree. Ledgers are created only with IDs allocated
// from the block by a monotonic CAS counter, and physically deleted only
// after re-checking the proof and the ledger's owner tag.
//
// It owns the reservation, its proof and the allocation counter. It must
// never create or delete a ledger without a valid proof, never hand out an
// ID twice (allocation only moves forward; an ID whose allocation or
// create outcome was unknown is burnt, never retried), never create an ID
// it did not allocate in this process, and never delete a ledger that does
// not carry this deployment's owner tag.
//
// # The range
//
// Block b (MinBlock <= b <= MaxBlock) is the IDs [b<<40, (b+1)<<40 - 1].
// MinBlock = 2^22 puts every block at or above 2^62: far above the IDs
// BookKeeper's own generator hands out (it counts up from 0, 2^31 at a time)
// and always in the long hierarchical znode layout.
//
// # The proof, and why it is sufficient
//
// Reserve writes two records naming the same reservation
// {format, deployment ID (random 128 bits), cluster alias, ledgers root,
// BookKeeper INSTANCEID, block, first, last}, each as CRC32C ‖ JSON:
//
//  1. the marker znode <ledgersRoot>/nereus-namespace/block-<b>, created
//     with ZooKeeper's atomic create-if-absent in the BookKeeper cluster
//     itself. Two deployments cannot both create it, so at most one owns
//     a block on a cluster. The name is non-numeric, so BookKeeper's ledger
//     iteration and garbage collection skip it, and
//     "bookkeeper shell nukeexistingcluster" refuses to run while it exists.
//  2. the reservation record in the Nereus metadata store (create-only).
//
// Open (and every CreateLedger and DeleteLedger, which re-verify) accepts
// the proof only if the record decodes with a valid checksum, the marker
// exists and holds the identical reservation, the cluster's INSTANCEID and
// ledgers root are the ones recorded, and the block is inside the reserved
// half. This binds the range to this deployment on this BookKeeper cluster:
// a deployment pointed at another cluster or root (different INSTANCEID or
// root), a second deployment (no record, or a marker naming another
// deployment ID), or a cluster re-initialised underneath us (new
// INSTANCEID, marker gone) all fail closed.
//
// What remains outside any proof: a non-Nereus writer that creates ledgers
// with explicit IDs inside our block. BookKeeper cannot forbid that. It is
// made harmless: a create of an existing ID is an atomic ZooKeeper create
// that fails (detected, never overwritten), and a delete only proceeds if
// the ledger's metadata carries this deployment's owner tag and is still at
// the version the caller read, so a foreign or replaced ledger is never
// deleted.
//
// # Outcomes
//
// Reserve: applied (reservation returned, also when it was already ours),
// conflict (ErrReserved: the block or the record belongs to someone else),
// unknown (ErrOutcomeUnknown; call Reserve again: it is idempotent).
// Allocate: an allocated ID, or an error (no ID handed out; an ID whose CAS
// answer was lost is burnt). CreateLedger and DeleteLedger: as in package
// bookkeeper, plus ErrNoProof / ErrProofInvalid / ErrNotAllocated /
// ErrNotOwner (all not applied).
package namespace
