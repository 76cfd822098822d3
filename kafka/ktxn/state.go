// Package ktxn is the Kafka transaction coordinator: the state of every
// transactional id (producer id and epoch, the partitions and groups of the
// ongoing transaction, the offsets it stages) and the decisions Kafka's
// coordinator makes on InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn,
// TxnOffsetCommit and EndTxn.
//
// Decisions are pure functions on a Record (this file); the Coordinator
// (coordinator.go) persists each new Record with one version-CAS on
// kafka/txns/<escaped id> in the metadata store BEFORE it acts on it, so
// the store always holds the furthest decision taken:
//
//	Empty/Complete* --AddPartitions--> Ongoing --EndTxn--> Prepare{Commit,Abort}
//	    --markers written, offsets applied--> Complete{Commit,Abort}
//
// A Prepare* record is the commit point of a transaction's outcome: after
// it is stored, the outcome never changes, and whoever finds it (the same
// broker after a SIGKILL, or the next owner) writes the markers and applies
// the staged offsets again (both are idempotent) and then records
// Complete*. An Ongoing record found after a restart stays ongoing (the
// producer may continue) until its timeout aborts it. So an in-doubt
// transaction is always completed or aborted, never half-visible: the
// partitions' last stable offset holds readers back until its marker.
//
// It owns no bytes: markers are appended through the Storage interface
// (package kafka over kstore) and it must never decide what a partition
// reader sees. It must never act on a decision whose CAS outcome is
// unknown without re-reading the record.
package ktxn

import (
	"math"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
)

// State is a transaction's state, with Kafka's names (DescribeTransactions,
// ListTransactions filters).
type State string

const (
	Empty          State = "Empty"
	Ongoing        State = "Ongoing"
	PrepareCommit  State = "PrepareCommit"
	PrepareAbort   State = "PrepareAbort"
	CompleteCommit State = "CompleteCommit"
	CompleteAbort  State = "CompleteAbort"
)

// Preparing reports whether the outcome is decided but not yet completed.
func (s State) Preparing() bool { return s == PrepareCommit || s == PrepareAbort }

// TopicPartition names a partition.
type TopicPartition struct {
	Topic     string `json:"t"`
	Partition int32  `json:"p"`
}

// Offset is one staged TxnOffsetCommit entry.
type Offset struct {
	Topic       string `json:"t"`
	Partition   int32  `json:"p"`
	Offset      int64  `json:"o"`
	LeaderEpoch int32  `json:"e"`
	Metadata    string `json:"m,omitempty"`
}

// Record is the persisted state of one transactional id (JSON, V=1).
type Record struct {
	V              int    `json:"v"`
	TxnID          string `json:"id"`
	ProducerID     int64  `json:"pid"`
	Epoch          int16  `json:"epoch"`
	LastProducerID int64  `json:"lastPid"`
	LastEpoch      int16  `json:"lastEpoch"`
	State          State  `json:"state"`
	TimeoutMs      int32  `json:"timeoutMs"`
	// StartMs is when the current transaction began (Ongoing/Prepare*).
	StartMs  int64 `json:"startMs,omitempty"`
	UpdateMs int64 `json:"updateMs"`
	// Partitions and Groups of the current transaction, sorted.
	Partitions []TopicPartition `json:"parts,omitempty"`
	Groups     []string         `json:"groups,omitempty"`
	// Offsets staged by TxnOffsetCommit, per group, applied on commit.
	Offsets map[string][]Offset `json:"offsets,omitempty"`
	// Nonce identifies the write that produced this record, so that an
	// unknown CAS outcome is settled by re-reading.
	Nonce uint64 `json:"nonce"`
}

const recordVersion = 1

// maxEpoch is the highest producer epoch handed out; past it the producer
// gets a new producer id (Kafka: Short.MaxValue - 1).
const maxEpoch = math.MaxInt16 - 1

func (r *Record) clone() Record {
	c := *r
	c.Partitions = append([]TopicPartition(nil), r.Partitions...)
	c.Groups = append([]string(nil), r.Groups...)
	if r.Offsets != nil {
		c.Offsets = make(map[string][]Offset, len(r.Offsets))
		for g, o := range r.Offsets {
			c.Offsets[g] = append([]Offset(nil), o...)
		}
	}
	return c
}

func (r *Record) hasPartition(tp TopicPartition) bool {
	i := sort.Search(len(r.Partitions), func(i int) bool { return !tpLess(r.Partitions[i], tp) })
	return i < len(r.Partitions) && r.Partitions[i] == tp
}

func tpLess(a, b TopicPartition) bool {
	if a.Topic != b.Topic {
		return a.Topic < b.Topic
	}
	return a.Partition < b.Partition
}

// checkProducer is Kafka's producer check on every transactional request
// after InitProducerId: another producer id is INVALID_PRODUCER_ID_MAPPING,
// another epoch is PRODUCER_FENCED.
func (r *Record) checkProducer(pid int64, epoch int16) int16 {
	switch {
	case r.State == "" || pid != r.ProducerID:
		return kerr.InvalidProducerIDMapping.Code
	case epoch != r.Epoch:
		return kerr.ProducerFenced.Code
	}
	return 0
}

// InitDecision is what InitProducerId does to a record.
type InitDecision struct {
	// AbortFirst: the record is Ongoing; abort it (with the bumped epoch,
	// fencing the old producer) before answering.
	AbortFirst bool
	// CompleteFirst: the record is Prepare*; finish it first.
	CompleteFirst bool
	// NeedNewPID: the epoch is exhausted (or the id is new); allocate a
	// producer id and call again with it.
	NeedNewPID bool
	// Next is the record to persist (when Code == 0 and none of the above).
	Next Record
	Code int16
}

// DecideInit is InitProducerId on an existing record (r.State != ""), or a
// new id (r.State == ""). reqPID/reqEpoch are -1 unless the client asks
// for a KIP-360 bump of a producer it already has. newPID is a freshly
// allocated producer id, or -1.
func DecideInit(r Record, txnID string, timeoutMs int32, reqPID int64, reqEpoch int16, newPID int64, nowMs int64) InitDecision {
	if r.State == "" {
		if newPID < 0 {
			return InitDecision{NeedNewPID: true}
		}
		return InitDecision{Next: Record{V: recordVersion, TxnID: txnID, ProducerID: newPID, Epoch: 0,
			LastProducerID: -1, LastEpoch: -1, State: Empty, TimeoutMs: timeoutMs, UpdateMs: nowMs}}
	}
	if r.State.Preparing() {
		return InitDecision{CompleteFirst: true}
	}
	if reqPID >= 0 {
		switch {
		case reqPID == r.ProducerID && reqEpoch == r.Epoch:
			// bump below
		case reqPID == r.LastProducerID && reqEpoch == r.LastEpoch:
			// A retry of a bump whose answer was lost: answer the same.
			if r.State == Ongoing {
				return InitDecision{AbortFirst: true}
			}
			n := r.clone()
			n.TimeoutMs, n.UpdateMs = timeoutMs, nowMs
			return InitDecision{Next: n}
		default:
			return InitDecision{Code: kerr.ProducerFenced.Code}
		}
	}
	if r.State == Ongoing {
		return InitDecision{AbortFirst: true}
	}
	n := r.clone()
	n.TimeoutMs, n.UpdateMs = timeoutMs, nowMs
	n.LastProducerID, n.LastEpoch = r.ProducerID, r.Epoch
	if r.Epoch >= maxEpoch {
		if newPID < 0 {
			return InitDecision{NeedNewPID: true}
		}
		n.ProducerID, n.Epoch = newPID, 0
	} else {
		n.Epoch = r.Epoch + 1
	}
	n.State = Empty
	n.Partitions, n.Groups, n.Offsets, n.StartMs = nil, nil, nil, 0
	return InitDecision{Next: n}
}

// DecideAddPartitions adds partitions to the transaction (starting it).
// It returns the record to persist, or an error code for all partitions.
func DecideAddPartitions(r Record, pid int64, epoch int16, tps []TopicPartition, nowMs int64) (Record, int16) {
	if c := r.checkProducer(pid, epoch); c != 0 {
		return r, c
	}
	if r.State.Preparing() {
		return r, kerr.ConcurrentTransactions.Code
	}
	n := r.clone()
	if n.State != Ongoing {
		n.State, n.StartMs = Ongoing, nowMs
		n.Partitions, n.Groups, n.Offsets = nil, nil, nil
	}
	n.Partitions = append(n.Partitions, tps...)
	sort.Slice(n.Partitions, func(i, j int) bool { return tpLess(n.Partitions[i], n.Partitions[j]) })
	uniq := n.Partitions[:0]
	for i, tp := range n.Partitions {
		if i == 0 || tp != n.Partitions[i-1] {
			uniq = append(uniq, tp)
		}
	}
	n.Partitions = uniq
	n.UpdateMs = nowMs
	return n, 0
}

// DecideAddGroup adds a consumer group to the transaction
// (AddOffsetsToTxn).
func DecideAddGroup(r Record, pid int64, epoch int16, group string, nowMs int64) (Record, int16) {
	if c := r.checkProducer(pid, epoch); c != 0 {
		return r, c
	}
	if r.State.Preparing() {
		return r, kerr.ConcurrentTransactions.Code
	}
	n := r.clone()
	if n.State != Ongoing {
		n.State, n.StartMs = Ongoing, nowMs
		n.Partitions, n.Groups, n.Offsets = nil, nil, nil
	}
	i := sort.SearchStrings(n.Groups, group)
	if i == len(n.Groups) || n.Groups[i] != group {
		n.Groups = append(n.Groups, "")
		copy(n.Groups[i+1:], n.Groups[i:])
		n.Groups[i] = group
	}
	n.UpdateMs = nowMs
	return n, 0
}

// DecideStageOffsets stages TxnOffsetCommit offsets; the group must have
// been added with AddOffsetsToTxn (Kafka's TV1 contract).
func DecideStageOffsets(r Record, pid int64, epoch int16, group string, offs []Offset, nowMs int64) (Record, int16) {
	if c := r.checkProducer(pid, epoch); c != 0 {
		return r, c
	}
	if r.State != Ongoing {
		if r.State.Preparing() {
			return r, kerr.ConcurrentTransactions.Code
		}
		return r, kerr.InvalidTxnState.Code
	}
	i := sort.SearchStrings(r.Groups, group)
	if i == len(r.Groups) || r.Groups[i] != group {
		return r, kerr.InvalidTxnState.Code
	}
	n := r.clone()
	if n.Offsets == nil {
		n.Offsets = map[string][]Offset{}
	}
	cur := n.Offsets[group]
	for _, o := range offs {
		replaced := false
		for k := range cur {
			if cur[k].Topic == o.Topic && cur[k].Partition == o.Partition {
				cur[k], replaced = o, true
				break
			}
		}
		if !replaced {
			cur = append(cur, o)
		}
	}
	n.Offsets[group] = cur
	n.UpdateMs = nowMs
	return n, 0
}

// EndDecision is what EndTxn does.
type EndDecision struct {
	Next Record
	// Persist: Next must be stored before completing.
	Persist bool
	// Complete: write markers and apply offsets for Next, then record
	// Complete*. (Also true for a retried EndTxn of a Prepare* record.)
	Complete bool
	Code     int16
}

// DecideEnd is EndTxn(commit or abort).
func DecideEnd(r Record, pid int64, epoch int16, commit bool, nowMs int64) EndDecision {
	if c := r.checkProducer(pid, epoch); c != 0 {
		return EndDecision{Code: c}
	}
	want := PrepareAbort
	done := CompleteAbort
	if commit {
		want, done = PrepareCommit, CompleteCommit
	}
	switch r.State {
	case Ongoing:
		n := r.clone()
		n.State, n.UpdateMs = want, nowMs
		if !commit {
			n.Offsets = nil
		}
		return EndDecision{Next: n, Persist: true, Complete: true}
	case want:
		return EndDecision{Next: r, Complete: true} // retry: finish it
	case done:
		return EndDecision{} // retry after completion: success
	case PrepareCommit, PrepareAbort, CompleteCommit, CompleteAbort:
		return EndDecision{Code: kerr.InvalidTxnState.Code}
	default: // Empty
		return EndDecision{Code: kerr.InvalidTxnState.Code}
	}
}

// DecideTimeout aborts an expired Ongoing transaction, bumping the epoch so
// that the producer that let it expire is fenced (as Kafka does).
func DecideTimeout(r Record, nowMs int64) (Record, bool) {
	if r.State != Ongoing || nowMs < r.StartMs+int64(r.TimeoutMs) {
		return r, false
	}
	n := r.clone()
	if n.Epoch < maxEpoch {
		n.LastProducerID, n.LastEpoch = n.ProducerID, n.Epoch
		n.Epoch++
	}
	n.State, n.UpdateMs, n.Offsets = PrepareAbort, nowMs, nil
	return n, true
}

// DecideFenceAbort aborts an Ongoing transaction because a new producer
// instance called InitProducerId: the epoch is bumped and the markers are
// written with it, so the old instance is fenced on every partition.
func DecideFenceAbort(r Record, nowMs int64) Record {
	n := r.clone()
	if n.Epoch < maxEpoch {
		n.LastProducerID, n.LastEpoch = n.ProducerID, n.Epoch
		n.Epoch++
	}
	n.State, n.UpdateMs, n.Offsets = PrepareAbort, nowMs, nil
	return n
}

// Completed is the record after the markers of a Prepare* record were
// written and its offsets applied.
func Completed(r Record, nowMs int64) Record {
	n := r.clone()
	if r.State == PrepareCommit {
		n.State = CompleteCommit
	} else {
		n.State = CompleteAbort
	}
	n.Partitions, n.Groups, n.Offsets = nil, nil, nil
	n.UpdateMs = nowMs
	return n
}
