package kafka

// Fetch: v4-12
//
// Behavior:
//   - Each partition returns whole stored batches starting with the batch
//     that contains fetch_offset (clients skip the records before it), with
//     baseOffset patched into each batch header while it is copied into the
//     response (outside the CRC; no decode, no re-encode).
//   - KIP-74: the first partition with data returns at least one batch even
//     if it is larger than partition_max_bytes / max_bytes; later
//     partitions stop at the remaining budget.
//   - Long poll: when fewer than min_bytes are available the request waits
//     up to max_wait_ms for a commit on any requested partition (stream
//     Notify channels), then answers with whatever it has. Shutdown ends the
//     wait early; a partition error (unknown partition, offset out of
//     range, fenced epoch) answers at once, as Kafka does.
//   - Fetch sessions (KIP-227) are refused: every response carries
//     session_id 0, so clients keep sending full fetches; an incremental
//     fetch naming a session gets FETCH_SESSION_ID_NOT_FOUND. A full response
//     holds exactly the requested partitions, in request order.
//   - last_stable_offset is the partition's LSO (the first offset of its
//     oldest open transaction, else the high watermark; package kstore's
//     transaction index). read_committed (isolation_level 1) returns only
//     batches below the LSO, counts only those toward min_bytes, and lists
//     the aborted transactions (producer id, first offset) whose abort
//     marker is at or after fetch_offset and which began before the end of
//     the returned data; the client skips those producers' batches up to
//     their abort marker, which it reads in the same data. Only the
//     partition's leader keeps its transaction state: a read_committed
//     fetch elsewhere gets NOT_LEADER_OR_FOLLOWER (a read_uncommitted one
//     is served, with last_stable_offset = high watermark).
//   - Any broker serves a fetch for any partition (storage is shared; the
//     leader's tail cache makes it the cheapest, not the only, reader). A
//     fetch never takes an append session.
//   - current_leader_epoch (v9+) is checked against the epoch of the
//     partition stream's current session (its head): older ->
//     FENCED_LEADER_EPOCH, newer -> UNKNOWN_LEADER_EPOCH.
//   - KIP-392 rack awareness (v11+): a fetch whose rack_id differs from this
//     broker's rack while an active broker of that rack exists is answered,
//     per partition, with preferred_read_replica = that broker (chosen by
//     rendezvous hashing among the rack's brokers, so a partition's readers
//     in one rack share one broker's cache) and no records; the consumer
//     then fetches there. Otherwise preferred_read_replica is -1.
//   - consumer_byte_rate quotas: a fetch that would exceed its client's
//     quota returns no records, with throttle_time_ms (quota.go).
//
// Version notes:
//   - v4: isolation_level, last_stable_offset, aborted_transactions (librdkafka
//     needs exactly v4 in range for MsgVer2).
//   - v5: log_start_offset.
//   - v7: fetch sessions (refused, see above).
//   - v9: current_leader_epoch.
//   - v10: zstd (librdkafka needs exactly v10 in range to enable zstd).
//   - v11: rack_id, preferred_read_replica.
//   - v12: flexible; last_fetched_epoch / diverging epoch (ignored: Nereus
//     logs are never truncated, so no epoch diverges).
//   - v13+ (topic ids) is not advertised; clients fall back to v12.

import (
	"context"
	"errors"
	"reflect"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/nereusstream/nereus-go/cluster"
	"github.com/nereusstream/nereus-go/kafka/kbatch"
	"github.com/nereusstream/nereus-go/kafka/kstore"
	"github.com/nereusstream/nereus-go/stream"
)

func init() { regKey(1, 4, 12, handleFetch) }

type fetchPart struct {
	req  *kmsg.FetchRequestTopicPartition
	out  *kmsg.FetchResponseTopicPartition
	part *kstore.Partition
	err  error
	// redirect: answered with a preferred read replica, never read here.
	redirect bool
	// entries are the stored batches to send (unmodified; the writer
	// patches their baseOffset on the way out) and size their byte total.
	entries []stream.ReadEntry
	size    int
	// res is the read entries came from: its recycled buffers are released
	// once the response is on the socket (fetchReply.release), or when the
	// partition is read again.
	res stream.ReadResult
}

const readCommitted = 1

func handleFetch(r *request) (kmsg.Response, func() kmsg.Response, error) {
	req := r.kreq.(*kmsg.FetchRequest)
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	s := r.s
	resp.SessionID = 0
	if req.Version >= 7 && req.SessionID > 0 && req.SessionEpoch > 0 {
		resp.ErrorCode = kerr.FetchSessionIDNotFound.Code
		return resp, nil, nil
	}

	var parts []fetchPart
	redirected := false // some partition was sent to its preferred read replica
	resp.Topics = make([]kmsg.FetchResponseTopic, len(req.Topics))
	for ti := range req.Topics {
		rt := &req.Topics[ti]
		ot := &resp.Topics[ti]
		ot.Topic = rt.Topic
		ot.TopicID = rt.TopicID
		ot.Partitions = make([]kmsg.FetchResponseTopicPartition, len(rt.Partitions))
		for pi := range rt.Partitions {
			rp := &rt.Partitions[pi]
			op := &ot.Partitions[pi]
			*op = kmsg.NewFetchResponseTopicPartition()
			op.Partition = rp.Partition
			_, p, err := s.store.Partition(r.ctx, rt.Topic, rp.Partition)
			if err == nil && req.Version >= 9 && rp.CurrentLeaderEpoch >= 0 {
				err = checkLeaderEpoch(r.ctx, s, p, rp.CurrentLeaderEpoch)
			}
			if err == nil && req.Version >= 11 {
				if id, ok := r.preferredReplica(req.Rack, p); ok {
					op.PreferredReadReplica = id
					if start, end, berr := s.store.Bounds(r.ctx, p); berr == nil {
						op.HighWatermark, op.LastStableOffset, op.LogStartOffset = end, end, start
					}
					redirected = true
					parts = append(parts, fetchPart{req: rp, out: op, part: p, redirect: true})
					continue
				}
			}
			parts = append(parts, fetchPart{req: rp, out: op, part: p, err: err})
		}
	}

	maxBytes := int(req.MaxBytes)
	if maxBytes <= 0 {
		maxBytes = 50 << 20
	}
	reply := &fetchReply{FetchResponse: resp, parts: parts}
	committed := req.Version >= 4 && req.IsolationLevel == readCommitted
	total := fillFetch(r.ctx, s, parts, maxBytes, committed)
	maxWait := time.Duration(req.MaxWaitMillis) * time.Millisecond
	if total >= int(req.MinBytes) || maxWait <= 0 || anyFetchError(parts) || redirected {
		throttleFetch(r, r.principalName(), reply, total)
		s.stats.FetchedBytes.Add(int64(total))
		return reply, nil, nil
	}
	user := r.principalName()
	return nil, func() kmsg.Response {
		deadline := time.NewTimer(maxWait)
		defer deadline.Stop()
		for total < int(req.MinBytes) && !anyFetchError(parts) {
			if !waitForCommit(r.ctx, s, parts, deadline.C) {
				break
			}
			total = fillFetch(r.ctx, s, parts, maxBytes, committed)
		}
		total = throttleFetch(r, user, reply, total)
		s.stats.FetchedBytes.Add(int64(total))
		return reply
	}, nil
}

// throttleFetch applies the consumer_byte_rate quota: a fetch that would
// take its client over the quota is answered without records (its bytes
// not counted) with throttle_time_ms, and the connection pauses. It
// returns the record bytes left in the reply.
func throttleFetch(r *request, user string, reply *fetchReply, total int) int {
	if total == 0 {
		return 0
	}
	client := r.hdr.clientID
	d := r.s.quotas.record(r.ctx, kstore.QuotaConsumerByteRate, user, client, total)
	if d <= 0 {
		return total
	}
	r.s.quotas.unrecord(kstore.QuotaConsumerByteRate, user, client, total)
	for i := range reply.parts {
		reply.parts[i].entries, reply.parts[i].size = nil, 0
		reply.parts[i].out.AbortedTransactions = nil
		reply.parts[i].res.Release()
		reply.parts[i].res = stream.ReadResult{}
	}
	reply.ThrottleMillis = int32(d / time.Millisecond)
	r.c.throttleConn(d)
	return 0
}

// anyFetchError reports whether a partition carries an error: like Kafka,
// such a fetch is answered at once instead of long-polling.
func anyFetchError(parts []fetchPart) bool {
	for i := range parts {
		if parts[i].out.ErrorCode != 0 {
			return true
		}
	}
	return false
}

// preferredReplica is the broker a consumer in rack should fetch p from
// (KIP-392), when that is not this broker: an active broker of the
// client's rack, chosen by rendezvous hashing of the partition's stream
// among them.
func (r *request) preferredReplica(rack string, p *kstore.Partition) (int32, bool) {
	s := r.s
	if rack == "" || rack == s.cluster.Self().Rack {
		return -1, false
	}
	var same []cluster.Broker
	for _, b := range s.cluster.View().Active() {
		if _, _, ok := r.kafkaEndpoint(b); ok && b.Rack == rack {
			same = append(same, b)
		}
	}
	b, ok := cluster.Pick(p.StreamName(), same)
	if !ok || b.NodeID == s.cluster.NodeID() {
		return -1, false
	}
	return b.KafkaID, true
}

// checkLeaderEpoch compares a client's current_leader_epoch with ours.
func checkLeaderEpoch(ctx context.Context, s *Server, p *kstore.Partition, clientEpoch int32) error {
	ours, err := s.store.LeaderEpoch(ctx, p)
	if err != nil {
		return err
	}
	switch {
	case clientEpoch < ours:
		return errFencedEpoch
	case clientEpoch > ours:
		return errUnknownEpoch
	}
	return nil
}

// fillFetch (re)reads every partition of the fetch into its response slot
// and returns the record bytes gathered. Reads use recycled buffers
// (stream.ReadOptions.Recycle), released once the reply is written.
func fillFetch(ctx context.Context, s *Server, parts []fetchPart, maxBytes int, committed bool) int {
	for i := range parts {
		parts[i].res.Release()
		parts[i].res = stream.ReadResult{}
	}
	pre := readPartsConcurrently(ctx, s, parts, maxBytes)
	total := 0
	for i := range parts {
		fp := &parts[i]
		op := fp.out
		fp.entries, fp.size = nil, 0
		op.AbortedTransactions = nil
		if fp.redirect {
			continue
		}
		if fp.err != nil {
			op.ErrorCode = errorCode(fp.err)
			continue
		}
		op.ErrorCode = 0
		remaining := maxBytes - total
		budget := min(int(fp.req.PartitionMaxBytes), remaining)
		if budget <= 0 {
			start, end, err := s.store.Bounds(ctx, fp.part)
			if err != nil {
				op.ErrorCode = errorCode(err)
				continue
			}
			lso, err := stableOffset(ctx, s, fp.part, end, committed)
			if err != nil {
				op.ErrorCode = errorCode(err)
				continue
			}
			op.HighWatermark, op.LastStableOffset, op.LogStartOffset = end, lso, start
			if fp.req.FetchOffset < start || fp.req.FetchOffset > end {
				op.ErrorCode = kerr.OffsetOutOfRange.Code
			}
			continue
		}
		var res stream.ReadResult
		var err error
		if pre != nil && pre[i].done {
			res, err = pre[i].res, pre[i].err
		} else {
			res, err = s.store.Read(ctx, fp.part, fp.req.FetchOffset, fetchReadOptions(budget))
		}
		fp.res = res
		op.HighWatermark, op.LastStableOffset, op.LogStartOffset = res.EndOffset, res.EndOffset, res.StartOffset
		if err != nil {
			op.ErrorCode = errorCode(err)
			if op.ErrorCode == kerr.OffsetOutOfRange.Code && res.EndOffset == 0 && res.StartOffset == 0 {
				if start, end, berr := s.store.Bounds(ctx, fp.part); berr == nil {
					op.HighWatermark, op.LastStableOffset, op.LogStartOffset = end, end, start
				}
			}
			continue
		}
		lso, err := stableOffset(ctx, s, fp.part, res.EndOffset, committed)
		if err != nil {
			op.ErrorCode = errorCode(err)
			fp.entries, fp.size = nil, 0
			continue
		}
		op.LastStableOffset = lso
		size, n := 0, 0
		for _, e := range res.Entries {
			if len(e.Payload) < kbatch.HeaderSize {
				break // not a batch we stored; never serve it
			}
			if committed && e.Offset >= lso {
				break // not stable yet
			}
			// KIP-74: only the first partition with data may exceed the
			// remaining budget, by one batch.
			if (total > 0 || n > 0) && size+len(e.Payload) > remaining {
				break
			}
			size += len(e.Payload)
			n++
		}
		fp.entries, fp.size = res.Entries[:n], size
		total += size
		if committed && n > 0 {
			last := res.Entries[n-1]
			aborted, err := s.store.AbortedTxns(ctx, fp.part, fp.req.FetchOffset, last.Offset+int64(last.RecordCount))
			if err != nil {
				op.ErrorCode = errorCode(err)
				fp.entries, fp.size = nil, 0
				total -= size
				continue
			}
			for _, a := range aborted {
				at := kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
				at.ProducerID, at.FirstOffset = a.ProducerID, a.First
				op.AbortedTransactions = append(op.AbortedTransactions, at)
			}
		}
	}
	return total
}

func fetchReadOptions(budget int) stream.ReadOptions {
	return stream.ReadOptions{MaxBytes: budget, MaxEntries: 10000, Recycle: true}
}

// partRead is one partition's read done ahead by readPartsConcurrently.
type partRead struct {
	done bool
	res  stream.ReadResult
	err  error
}

// readPartsConcurrently reads the fetch's partitions in parallel (on up to
// GOMAXPROCS goroutines) when their partition budgets together fit in the
// fetch's maxBytes, so no partition's budget depends on what the ones
// before it return: each then reads with exactly the budget fillFetch's
// sequential pass would give it, and that pass trims the results (KIP-74)
// as before. A catch-up fetch of several partitions then uses every core
// for its storage reads instead of one. It returns nil (read in turn) when
// fewer than two partitions are to be read or the budgets overlap.
func readPartsConcurrently(ctx context.Context, s *Server, parts []fetchPart, maxBytes int) []partRead {
	var todo []int
	sum := 0
	for i := range parts {
		fp := &parts[i]
		if fp.redirect || fp.err != nil {
			continue
		}
		b := min(int(fp.req.PartitionMaxBytes), maxBytes)
		if b <= 0 {
			continue
		}
		sum += b
		todo = append(todo, i)
	}
	if len(todo) < 2 || sum > maxBytes {
		return nil
	}
	pre := make([]partRead, len(parts))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(len(todo), runtime.GOMAXPROCS(0)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				k := int(next.Add(1)) - 1
				if k >= len(todo) {
					return
				}
				i := todo[k]
				fp := &parts[i]
				budget := min(int(fp.req.PartitionMaxBytes), maxBytes)
				res, err := s.store.Read(ctx, fp.part, fp.req.FetchOffset, fetchReadOptions(budget))
				pre[i] = partRead{done: true, res: res, err: err}
			}
		}()
	}
	wg.Wait()
	return pre
}

// stableOffset is the partition's last stable offset. Only the leader
// keeps transaction state: elsewhere a read_committed fetch gets
// NOT_LEADER_OR_FOLLOWER (the client then fetches from the leader), and a
// read_uncommitted one, which does not use it, is told the high watermark.
func stableOffset(ctx context.Context, s *Server, p *kstore.Partition, hwm int64, committed bool) (int64, error) {
	lso, err := s.store.StableOffset(ctx, p, hwm)
	if err != nil && !committed && errors.Is(err, kstore.ErrNotLeader) {
		return hwm, nil
	}
	return lso, err
}

// waitForCommit blocks until any requested partition's head changes, the
// deadline fires, the connection ends or the server shuts down. It returns
// false when the caller should stop waiting.
func waitForCommit(ctx context.Context, s *Server, parts []fetchPart, deadline <-chan time.Time) bool {
	cases := make([]reflect.SelectCase, 0, len(parts)+3)
	cases = append(cases,
		reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(deadline)},
		reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctx.Done())},
		reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(s.stopping)},
	)
	for i := range parts {
		fp := &parts[i]
		if fp.err != nil || fp.part == nil || fp.redirect {
			continue
		}
		end, ch, err := s.store.Notify(ctx, fp.part)
		if err != nil {
			return false // answer now; the next fetch reports the error
		}
		if end != fp.out.HighWatermark {
			return true // committed since we read
		}
		cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ch)})
	}
	chosen, _, _ := reflect.Select(cases)
	return chosen >= 3
}
