package kafka

import (
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/nereusstream/nereus-go/kafka/kbatch"
)

// seedFrames returns well-formed request frames (without the size prefix)
// of several kinds and versions.
func seedFrames() [][]byte {
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("fuzz"))
	var out [][]byte
	add := func(r kmsg.Request) { out = append(out, f.AppendRequest(nil, r, 1)[4:]) }
	for v := int16(0); v <= 4; v++ {
		r := kmsg.NewPtrApiVersionsRequest()
		r.Version, r.ClientSoftwareName, r.ClientSoftwareVersion = v, "a", "1"
		add(r)
	}
	b := kbatch.Build(kbatch.BuildOptions{ProducerID: 1, BaseSequence: 0}, []kbatch.Record{{Value: []byte("v")}})
	for _, v := range []int16{3, 7, 9, 11} {
		add(produceReq(v, -1, "t", 0, b))
	}
	for _, v := range []int16{4, 10, 12} {
		add(fetchReq(v, "t", 0, 0, 0, 0))
	}
	for _, v := range []int16{0, 4, 9, 12} {
		m := kmsg.NewPtrMetadataRequest()
		m.Version = v
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = kmsg.StringPtr("t")
		m.Topics = append(m.Topics, mt)
		add(m)
	}
	j := kmsg.NewPtrJoinGroupRequest()
	j.Version, j.Group, j.ProtocolType, j.SessionTimeoutMillis = 4, "g", "consumer", 10000
	j.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{0, 1}}}
	add(j)
	oc := kmsg.NewPtrOffsetCommitRequest()
	oc.Version, oc.Group = 8, "g"
	add(oc)
	ct := kmsg.NewPtrCreateTopicsRequest()
	ct.Version = 7
	ct.Topics = []kmsg.CreateTopicsRequestTopic{{Topic: "t", NumPartitions: 1, ReplicationFactor: 1}}
	add(ct)
	return out
}

// FuzzDecodeRequest: the request decoder (header, registry gate, produce
// pre-check, kmsg body) never panics on any input, and a decoded request is
// at a registered version.
func FuzzDecodeRequest(f *testing.F) {
	for _, s := range seedFrames() {
		f.Add(s)
	}
	f.Add([]byte{0, 18, 0, 99, 0, 0, 0, 1, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, frame []byte) {
		req, h, err := decodeRequest(frame)
		if err != nil || req == nil {
			return
		}
		a := lookupAPI(h.key)
		if a == nil || h.version < a.min || h.version > a.max || req.GetVersion() != h.version {
			t.Fatalf("decoded key %d v%d outside registry", h.key, h.version)
		}
	})
}

// FuzzServerFrames writes arbitrary bytes as one frame to a live server and
// checks that the server answers or closes that connection and keeps
// serving new ones.
func FuzzServerFrames(f *testing.F) {
	for _, s := range seedFrames() {
		f.Add(s)
	}
	s := startServer(f, Config{MaxRequestBytes: 1 << 20, MaxOtherRequestBytes: 1 << 20}, nil)
	f.Fuzz(func(t *testing.T, body []byte) {
		nc, err := net.Dial("tcp", s.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		frame := binary.BigEndian.AppendUint32(nil, uint32(len(body)))
		if _, err := nc.Write(append(frame, body...)); err != nil {
			return
		}
		// One response frame, a close or a timeout (long poll / group
		// wait). Waiting for the close after a response made every input
		// cost the whole timeout: ~13 inputs/s, and batches long enough
		// that the fuzz deadline caught a worker mid-batch (reported as
		// "context deadline exceeded").
		_ = nc.SetDeadline(time.Now().Add(150 * time.Millisecond))
		var size [4]byte
		if _, err := io.ReadFull(nc, size[:]); err == nil {
			_, _ = io.CopyN(io.Discard, nc, int64(binary.BigEndian.Uint32(size[:])))
		}
		c := dial(t, s.addr)
		c.do(kmsg.NewPtrApiVersionsRequest())
	})
}
