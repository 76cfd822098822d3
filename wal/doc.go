// Package wal is a replication log that lives entirely in an object store:
// segment objects hold framed records, one CAS-protected manifest object is
// the ordering authority, an epoch-fenced single Producer group-commits, and
// any number of Replicas tail the manifest and hand records to an Applier. A
// Collector reclaims what no reader can ever need.
//
// It owns the segment and manifest byte formats, the commit protocol (epoch
// claim, ordered manifest CAS, resolution of unknown outcomes) and retention.
// It must never interpret record bytes (they belong to the application), never
// append a record twice, never acknowledge an Append before its manifest CAS
// landed, and never serve bytes that failed their checksum.
//
// # Model
//
// A single CAS-protected manifest object describes both the live WAL tail and
// the base snapshot a new or lagging replica restores from, and lets a consumer
// address playback to an individual record sequence.
//
// Sequence model: each entry owns a contiguous half-open range of record
// sequences [Sequence, Sequence+Count). A segment with N framed records
// advances the log's NextSequence by N, and record i in that segment has
// sequence Sequence+i. Entries tile the sequence space with no gaps or
// overlaps, so a consumer can read only the manifest, find the entry whose
// range contains a target sequence (Locate), and start reading segments from
// there. Legacy footers (v1 buffer, v2) used one sequence per entry; their
// entries are read back with Count==0, meaning "this segment occupies a single
// sequence slot and all its records share that sequence" - the original
// whole-segment semantics, preserved so old manifests still replay correctly.
//
// The manifest CAS is the single linearization point: order is defined by the
// manifest commit, never by upload completion. Replicas read a segment only
// after its entry exists, so early or failed uploads are invisible.
//
// # Write path
//
// Append -> pending -> sealer -> upload workers -> committer:
//
//   - Append enqueues a group of records and blocks while the in-flight budget
//     (MaxInFlightBytes, MaxInFlightBatches) is exhausted.
//   - The sealer seals pending groups when FlushBytes is reached or the oldest
//     has waited FlushInterval — or, with GroupCommit, as soon as no segment
//     upload is in flight (what arrived during an upload becomes the next
//     segment, whose upload overlaps the previous manifest CAS): at once for
//     a group appended to an idle producer, and for groups appended while
//     others were in flight once GroupCommitMinWait has passed since the
//     previous seal or they reach GroupCommitMinBytes (fewer, larger
//     segments under load)
//     — packs them into segments of at most
//     SegmentMaxBytes (groups kept whole) and names each
//     "<SegmentPrefix>/<runID>/<ordinal:016x>": runID is a ULID chosen per
//     Producer, ordinals count from 0 per run, so a location is unique for all
//     time and a lost CAS response can be resolved by looking for it.
//   - Upload workers (UploadConcurrency) encode and PUT segments in parallel,
//     retrying with backoff; a retry rewrites identical bytes.
//   - The committer commits uploaded segments strictly in ordinal order,
//     coalescing ready segments into one manifest CAS (group commit: while a
//     CAS is in flight, later uploads finish and join the next one). A
//     permanently failed upload halts the producer rather than reorder.
//
// The producer's clock, timers, goroutines and randomness come from
// ProducerConfig.Runtime (runtime.go; nil = the real ones). A deterministic
// simulator supplies its own and runs the pipeline above one goroutine at a
// time: every wait first tells it what it waits for (Runtime.Block), and
// selects take a fixed ready case, so a run replays from its seed.
//
// Claim and fencing: NewProducer bumps the manifest epoch with a CAS. Every
// commit is a CAS against a manifest version observed at the producer's own
// epoch, so it can land only if the epoch is still ours; a 412 reloads the
// manifest, and a newer epoch halts the producer with ErrFenced. Someone else
// at the same epoch (a snapshotter or Collector calling SetSnapshot or
// TruncateThrough) is a free re-plan: the producer re-applies its pending
// entries to the fresh manifest. Producer.Truncate avoids even that: it
// folds a truncation into the producer's own next commit (or, when idle, a
// commit of its own), so the producer stays the manifest's only writer. A
// commit whose outcome is unknown (timeout,
// reset, 5xx) is never blindly retried: the next reload proves whether it
// landed via TailLocations and NextSequence (only the producer appends at its
// epoch) and resolves it, so nothing is appended twice. A Durability error
// wrapping ErrNotCommitted proves the records absent (every CAS that could
// carry them definitely failed, or none was tried); any other error leaves
// the outcome unknown.
//
// # Read path and retention
//
// A Replica loads the manifest, fetches segments from its cursor on (with a
// small read-ahead), verifies them, applies each record through the Applier
// (which must be idempotent) and saves its cursor per segment. A flipped bit
// yields ErrCorrupt and Run stops. A replica whose cursor lies below the first
// live entry gets ErrTruncated and must bootstrap from the snapshot pointer
// (StartAt = ThroughSeq+1; a StartAt inside a segment skips its leading
// records). With ReplicaID set, the replica publishes its cursor at
// "<ManifestPath>.cursors/<ReplicaID>". A Collector truncates the manifest per
// its TruncatePolicy, never past min(published cursor)-1, and deletes segments
// that are unreferenced, past a grace period and provably dead (see
// Collector).
//
// # Byte layouts
//
// All integers are little-endian. CRC32C is CRC-32 with the Castagnoli
// polynomial.
//
// Segment v2 (written by default):
//
//	frame block, optionally zstd-compressed as a whole:
//	  frame := len u32 | crc32c(len bytes ‖ payload) u32 | payload [len]
//	footer (31 bytes):
//	  compression u8 | record_count u32 | frames_len u64 | epoch u64 |
//	  magic "NWS2" [4] | crc32c u32 (covers every byte before it) | version u16 (=2)
//
// frames_len is the length of the uncompressed frame block; epoch is the
// claimed epoch of the writing producer (the Collector uses it to prove an
// uncommitted segment's producer is fenced). In an uncompressed segment the
// frames start at offset 0 and one Append's frames are contiguous, so a
// Placement's [Offset, Offset+Length) range can be fetched and verified alone
// (DecodeFrames). The whole-object digest is checked before any decompression.
//
// Segment batch-v1 (the buffer's data batch; read always, written with
// ProducerConfig.LegacySegmentFormat; no checksum, no Placement):
//
//	frame block, optionally zstd:  frame := len u32 | payload [len]
//	footer (7 bytes): compression u8 | record_count u32 | version u16 (=1)
//
// Segments written by objwal's own v2 (batch-v1 frames; footer compression u8 |
// record_count u32 | crc32c u32 | version u16 (=2), no magic) are also read.
//
// Manifest (read from the end; parts marked vN appear from footer version N):
//
//	entry (v3+):  body_len u32 | sequence u64 | count u32 | loc_len u16 | loc |
//	              md_count u32 | md_count × (start_index u32 | ingestion_ms i64 |
//	              payload_len u32 | payload)
//	entry (v1,v2): the same without count
//	entries, back to back
//	snapshot block (v2+): loc bytes | loc_len u16 | through_seq u64 | created_ms i64
//	footer: entries_count u32 | next_sequence u64 | epoch u64 |
//	        crc32c u32 (v4 only; covers every byte before it) | version u16
//
// body_len counts the bytes after itself. This package writes v4 and reads
// v1-v4; a parsed legacy manifest is normalized in memory (count 0 inserted)
// and a re-commit upgrades the object to v4. Every parse failure wraps
// ErrCorrupt; v1-v3 carry no checksum, so only structural damage is caught.
//
// Published cursor "<ManifestPath>.cursors/<ReplicaID>" (14 bytes):
// next u64 | crc32c(next) u32 | version u16 (=1).
//
// To change a format: add a new version number, keep reading every older
// one, write only the newest, and add a golden fixture for the new version
// next to the existing ones in the tests.
package wal
