package kafka

import (
	"encoding/binary"
	"net"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// framer is a response that writes its own frame as a list of buffers
// (writev) instead of being encoded into one contiguous slice.
type framer interface {
	frame(corrID int32) net.Buffers
}

// fetchReply is a Fetch response whose record batches are not copied into
// the response: the frame interleaves small encoded chunks (headers, field
// values, each batch's patched 8-byte baseOffset) with the stored batch
// bytes themselves (from byte 8 on), which go to the socket by writev. The
// batch bytes are never modified, so they may be shared with the core's
// cache. The embedded FetchResponse holds every non-record field; its own
// AppendTo must not be used (it lacks the records).
type fetchReply struct {
	*kmsg.FetchResponse
	parts []fetchPart // in the order of Topics[].Partitions[]
}

// release hands back the recycled buffers the reply's batches alias; the
// writer calls it once the frame is on the socket (or failed to get there).
func (f *fetchReply) release() {
	for i := range f.parts {
		f.parts[i].res.Release()
	}
}

func appendStr(dst []byte, s string, flexible bool) []byte {
	if flexible {
		dst = binary.AppendUvarint(dst, uint64(len(s))+1)
	} else {
		dst = binary.BigEndian.AppendUint16(dst, uint16(len(s)))
	}
	return append(dst, s...)
}

func appendArrLen(dst []byte, n int, flexible bool) []byte {
	if flexible {
		return binary.AppendUvarint(dst, uint64(n)+1)
	}
	return binary.BigEndian.AppendUint32(dst, uint32(n))
}

// frame encodes the response exactly as kmsg would (versions 4-12; a test
// checks byte equality against kmsg), with the size prefix filled in.
func (f *fetchReply) frame(corrID int32) net.Buffers {
	r := f.FetchResponse
	v := r.Version
	flex := v >= 12
	var bufs net.Buffers
	nEntries := 0
	for i := range f.parts {
		nEntries += len(f.parts[i].entries)
	}
	offsets := make([]byte, 8*nEntries) // patched baseOffsets, one backing array
	chunk := make([]byte, 0, 64+48*len(f.parts))
	chunkStart := 0
	cut := func() {
		if len(chunk) > chunkStart {
			bufs = append(bufs, chunk[chunkStart:len(chunk):len(chunk)])
		}
		chunkStart = len(chunk)
	}
	chunk = append(chunk, 0, 0, 0, 0) // size, filled below
	chunk = binary.BigEndian.AppendUint32(chunk, uint32(corrID))
	if flex {
		chunk = append(chunk, 0) // response header tags
	}
	chunk = binary.BigEndian.AppendUint32(chunk, uint32(r.ThrottleMillis))
	if v >= 7 {
		chunk = binary.BigEndian.AppendUint16(chunk, uint16(r.ErrorCode))
		chunk = binary.BigEndian.AppendUint32(chunk, uint32(r.SessionID))
	}
	chunk = appendArrLen(chunk, len(r.Topics), flex)
	pi, oi := 0, 0
	for ti := range r.Topics {
		t := &r.Topics[ti]
		chunk = appendStr(chunk, t.Topic, flex)
		chunk = appendArrLen(chunk, len(t.Partitions), flex)
		for j := range t.Partitions {
			p := &t.Partitions[j]
			fp := &f.parts[pi]
			pi++
			chunk = binary.BigEndian.AppendUint32(chunk, uint32(p.Partition))
			chunk = binary.BigEndian.AppendUint16(chunk, uint16(p.ErrorCode))
			chunk = binary.BigEndian.AppendUint64(chunk, uint64(p.HighWatermark))
			chunk = binary.BigEndian.AppendUint64(chunk, uint64(p.LastStableOffset))
			if v >= 5 {
				chunk = binary.BigEndian.AppendUint64(chunk, uint64(p.LogStartOffset))
			}
			// aborted_transactions: null unless a read_committed fetch
			// returned data some aborted transaction overlaps.
			switch {
			case p.AbortedTransactions == nil && flex:
				chunk = append(chunk, 0)
			case p.AbortedTransactions == nil:
				chunk = binary.BigEndian.AppendUint32(chunk, 0xffffffff)
			default:
				chunk = appendArrLen(chunk, len(p.AbortedTransactions), flex)
				for _, a := range p.AbortedTransactions {
					chunk = binary.BigEndian.AppendUint64(chunk, uint64(a.ProducerID))
					chunk = binary.BigEndian.AppendUint64(chunk, uint64(a.FirstOffset))
					if flex {
						chunk = append(chunk, 0)
					}
				}
			}
			if v >= 11 {
				chunk = binary.BigEndian.AppendUint32(chunk, uint32(p.PreferredReadReplica))
			}
			if flex {
				chunk = binary.AppendUvarint(chunk, uint64(fp.size)+1)
			} else {
				chunk = binary.BigEndian.AppendUint32(chunk, uint32(fp.size))
			}
			if len(fp.entries) > 0 {
				cut()
				for _, e := range fp.entries {
					o := offsets[oi : oi+8 : oi+8]
					oi += 8
					binary.BigEndian.PutUint64(o, uint64(e.Offset))
					bufs = append(bufs, o, e.Payload[8:])
				}
			}
			if flex {
				chunk = append(chunk, 0) // partition tags
			}
		}
		if flex {
			chunk = append(chunk, 0) // topic tags
		}
	}
	if flex {
		chunk = append(chunk, 0) // response tags
	}
	cut()
	total := 0
	for _, b := range bufs {
		total += len(b)
	}
	binary.BigEndian.PutUint32(bufs[0], uint32(total-4))
	return bufs
}
