package kafka

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/nereusstream/nereus-go/kafka/kbatch"
	"github.com/nereusstream/nereus-go/stream"
)

// TestFetchFrameMatchesKmsg: the writev Fetch encoder produces exactly the
// bytes kmsg's encoder produces for the same response (with the records
// copied and patched), for every advertised version.
func TestFetchFrameMatchesKmsg(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for v := int16(4); v <= 12; v++ {
		for iter := 0; iter < 20; iter++ {
			resp := kmsg.NewPtrFetchResponse()
			resp.Version = v
			resp.ThrottleMillis = rng.Int32N(3)
			resp.SessionID = 0
			var parts []fetchPart
			for ti := 0; ti < 1+rng.IntN(3); ti++ {
				ot := kmsg.NewFetchResponseTopic()
				ot.Topic = string(rune('a'+ti)) + "-topic"
				ot.Partitions = make([]kmsg.FetchResponseTopicPartition, 1+rng.IntN(4))
				resp.Topics = append(resp.Topics, ot)
			}
			for ti := range resp.Topics {
				for pi := range resp.Topics[ti].Partitions {
					op := &resp.Topics[ti].Partitions[pi]
					*op = kmsg.NewFetchResponseTopicPartition()
					op.Partition = int32(pi)
					op.HighWatermark, op.LastStableOffset, op.LogStartOffset = rng.Int64N(1000), 7, rng.Int64N(5)
					op.ErrorCode = int16(rng.IntN(2))
					if rng.IntN(2) == 0 {
						for a := 0; a < rng.IntN(3); a++ {
							at := kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
							at.ProducerID, at.FirstOffset = rng.Int64N(1<<40), rng.Int64N(1000)
							op.AbortedTransactions = append(op.AbortedTransactions, at)
						}
					}
					var entries []stream.ReadEntry
					size := 0
					off := rng.Int64N(100)
					for e := 0; e < rng.IntN(4); e++ {
						n := 1 + rng.IntN(5)
						recs := make([]kbatch.Record, n)
						for i := range recs {
							recs[i].Value = bytes.Repeat([]byte{byte(i)}, rng.IntN(300))
						}
						b := kbatch.Build(kbatch.BuildOptions{ProducerID: -1, BaseSequence: -1}, recs)
						entries = append(entries, stream.ReadEntry{Offset: off, RecordCount: uint32(n), Payload: b})
						off += int64(n)
						size += len(b)
					}
					parts = append(parts, fetchPart{out: op, entries: entries, size: size})
				}
			}
			reply := &fetchReply{FetchResponse: resp, parts: parts}
			var got bytes.Buffer
			for _, b := range reply.frame(42) {
				got.Write(b)
			}
			reply.materialize()
			for ti := range resp.Topics {
				for pi := range resp.Topics[ti].Partitions {
					if resp.Topics[ti].Partitions[pi].RecordBatches == nil {
						resp.Topics[ti].Partitions[pi].RecordBatches = []byte{}
					}
				}
			}
			want := encodeResponse(nil, 1, 42, resp)
			if !bytes.Equal(got.Bytes(), want) {
				t.Fatalf("v%d iter %d: writev frame differs from kmsg (%d vs %d bytes)", v, iter, got.Len(), len(want))
			}
		}
	}
}

// materialize fills RecordBatches with patched copies of the entries (for
// tests comparing against kmsg's encoder).
func (f *fetchReply) materialize() {
	pi := 0
	for ti := range f.Topics {
		for j := range f.Topics[ti].Partitions {
			fp := &f.parts[pi]
			pi++
			buf := make([]byte, 0, fp.size)
			for _, e := range fp.entries {
				off := len(buf)
				buf = append(buf, e.Payload...)
				kbatch.SetBaseOffset(buf[off:], e.Offset)
			}
			f.Topics[ti].Partitions[j].RecordBatches = buf
		}
	}
}
