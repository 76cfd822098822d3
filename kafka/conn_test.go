package kafka

import (
	"encoding/binary"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/nereusstream/nereus-go/kafka/kbatch"
)

func TestApiVersionsTable(t *testing.T) {
	s := startServer(t, Config{}, nil)
	c := dial(t, s.addr)
	for v := int16(0); v <= 4; v++ {
		req := kmsg.NewPtrApiVersionsRequest()
		req.Version = v
		req.ClientSoftwareName, req.ClientSoftwareVersion = "raw-test", "1.0"
		resp := c.do(req).(*kmsg.ApiVersionsResponse)
		if resp.ErrorCode != 0 {
			t.Fatalf("v%d: error %d", v, resp.ErrorCode)
		}
		got := map[int16][2]int16{}
		for _, k := range resp.ApiKeys {
			got[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
		}
		// The old-librdkafka traps: exact legacy versions must be inside
		// the advertised ranges.
		for _, need := range [][2]int16{{0, 0}, {0, 3}, {0, 7}, {1, 4}, {1, 10}, {10, 0}, {11, 0}, {18, 0}, {23, 2}, {2, 1}} {
			r, ok := got[need[0]]
			if !ok || need[1] < r[0] || need[1] > r[1] {
				t.Fatalf("key %d v%d not in advertised range %v", need[0], need[1], r)
			}
		}
		for _, unwanted := range []int16{27} {
			if _, ok := got[unwanted]; ok {
				t.Fatalf("key %d advertised but not implemented", unwanted)
			}
		}
	}
}

// TestApiVersionsUnknownVersion: KIP-511. A version above our maximum is
// answered at v0 with UNSUPPORTED_VERSION and the key table, and the
// response header has no tag byte even though the request was flexible.
func TestApiVersionsUnknownVersion(t *testing.T) {
	s := startServer(t, Config{}, nil)
	c := dial(t, s.addr)
	// Hand-encode a v9 ApiVersions request (flexible header, empty body).
	frame := []byte{0, 0, 0, 0, 0, 18, 0, 9, 0, 0, 0, 7, 0, 3, 'a', 'b', 'c', 0, 0xde, 0xad}
	binary.BigEndian.PutUint32(frame, uint32(len(frame)-4))
	if _, err := c.nc.Write(frame); err != nil {
		t.Fatal(err)
	}
	corr, body, err := c.readFrame()
	if err != nil {
		t.Fatal(err)
	}
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 0
	if corr != 7 {
		t.Fatalf("corr %d", corr)
	}
	if err := resp.ReadFrom(body); err != nil {
		t.Fatal(err)
	}
	if resp.ErrorCode != kerr.UnsupportedVersion.Code || len(resp.ApiKeys) == 0 {
		t.Fatalf("got %+v", resp)
	}
	// The connection stays usable.
	if r := c.do(kmsg.NewPtrApiVersionsRequest()).(*kmsg.ApiVersionsResponse); r.ErrorCode != 0 {
		t.Fatal(r.ErrorCode)
	}
}

func TestApiVersionsV3ResponseHeaderHasNoTags(t *testing.T) {
	s := startServer(t, Config{}, nil)
	c := dial(t, s.addr)
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	req.ClientSoftwareName, req.ClientSoftwareVersion = "x", "1"
	corr := c.send(req)
	got, body, err := c.readFrame()
	if err != nil || got != corr {
		t.Fatal(err, got)
	}
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 3
	// Body begins directly with error_code (int16 0): a stray tag byte would
	// shift it.
	if err := resp.ReadFrom(body); err != nil || resp.ErrorCode != 0 || len(resp.ApiKeys) < 10 {
		t.Fatalf("err %v resp %+v", err, resp)
	}
}

func TestInvalidClientSoftwareName(t *testing.T) {
	s := startServer(t, Config{}, nil)
	c := dial(t, s.addr)
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	req.ClientSoftwareName, req.ClientSoftwareVersion = "bad name!", "1"
	if r := c.do(req).(*kmsg.ApiVersionsResponse); r.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("got %d", r.ErrorCode)
	}
}

// TestPipelinedResponsesInOrder: many requests of mixed kinds written
// without waiting; responses come back in request order, and acks=0
// produces are skipped without stalling the others.
func TestPipelinedResponsesInOrder(t *testing.T) {
	s := startServer(t, Config{}, nil)
	c := dial(t, s.addr)
	mustCreateTopic(t, c, "pipe", 2, nil)
	var want []int32
	var kinds []kmsg.Response
	for i := 0; i < 30; i++ {
		var req kmsg.Request
		switch i % 3 {
		case 0:
			b := kbatch.Build(kbatch.BuildOptions{ProducerID: -1, BaseSequence: -1}, []kbatch.Record{{Value: []byte("x")}})
			req = produceReq(9, 0, "pipe", int32(i%2), b) // acks=0: no response
			c.send(req)
			continue
		case 1:
			req = fetchReq(12, "pipe", 1, 0, 0, 0)
		default:
			m := kmsg.NewPtrMetadataRequest()
			m.Version = 12
			req = m
		}
		want = append(want, c.send(req))
		kinds = append(kinds, req.ResponseKind())
	}
	for i, corr := range want {
		c.recv(corr, kinds[i])
	}
	// All acks=0 appends landed.
	deadline := time.Now().Add(5 * time.Second)
	for {
		r := c.do(listOffsetsReq("pipe", 0, -1)).(*kmsg.ListOffsetsResponse)
		r2 := c.do(listOffsetsReq("pipe", 1, -1)).(*kmsg.ListOffsetsResponse)
		if r.Topics[0].Partitions[0].Offset+r2.Topics[0].Partitions[0].Offset == 10 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("acks=0 records missing")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func listOffsetsReq(topic string, p int32, ts int64) *kmsg.ListOffsetsRequest {
	req := kmsg.NewPtrListOffsetsRequest()
	req.Version = 6
	req.ReplicaID = -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = p, ts, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// TestBadFramesCloseOnlyThatConnection: malformed, truncated, oversized and
// unknown-key/version frames each close their connection with a log line;
// a connection opened before and one opened after keep working.
func TestBadFramesCloseOnlyThatConnection(t *testing.T) {
	s := startServer(t, Config{MaxRequestBytes: 1 << 20, MaxOtherRequestBytes: 64 << 10}, nil)
	good := dial(t, s.addr)
	good.do(kmsg.NewPtrApiVersionsRequest())

	frame := func(body []byte) []byte {
		return binary.BigEndian.AppendUint32(nil, uint32(len(body))) // caller appends body
	}
	cases := map[string]struct {
		bytes []byte
		log   string
	}{
		"tiny frame":     {[]byte{0, 0, 0, 3, 1, 2, 3}, "frame size 3"},
		"negative size":  {[]byte{0xff, 0xff, 0xff, 0xf0}, "frame size"},
		"oversized":      {binary.BigEndian.AppendUint32(nil, 2<<20), "frame size"},
		"oversized meta": {append(binary.BigEndian.AppendUint32(nil, 100<<10), 0, 3), "exceeds"},
		"unknown key":    {append(frame(make([]byte, 12)), append([]byte{0x7f, 0x00, 0, 0, 0, 0, 0, 1, 0, 0}, 0, 0)...), "unsupported api key"},
		"bad version":    {append(frame(make([]byte, 10)), []byte{0, 3, 0, 99, 0, 0, 0, 1, 0, 0}...), "unsupported version 99"},
		"client id overrun": {append(frame(make([]byte, 10)), []byte{0, 3, 0, 1, 0, 0, 0, 1, 0, 50}...),
			"client id length"},
		"garbage body": {append(frame(make([]byte, 14)), []byte{0, 3, 0, 1, 0, 0, 0, 1, 0xff, 0xff, 0x7f, 0xff, 0xff, 0xff}...),
			"decode Metadata"},
		"bad produce": {append(frame(make([]byte, 22)), []byte{0, 0, 0, 7, 0, 0, 0, 1, 0xff, 0xff,
			0xff, 0xff, 0, 1, 0, 0, 0, 0, 0x7f, 0xff, 0xff, 0xff}...), "malformed produce"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := dial(t, s.addr)
			if _, err := c.nc.Write(tc.bytes); err != nil {
				t.Fatal(err)
			}
			c.expectClosed()
			deadline := time.Now().Add(5 * time.Second)
			for !strings.Contains(s.logs.String(), tc.log) {
				if time.Now().After(deadline) {
					t.Fatalf("no log line containing %q in:\n%s", tc.log, s.logs.String())
				}
				time.Sleep(5 * time.Millisecond)
			}
			// The server keeps serving: old and new connections work.
			good.do(kmsg.NewPtrApiVersionsRequest())
			dial(t, s.addr).do(kmsg.NewPtrApiVersionsRequest())
		})
	}
	t.Run("truncated", func(t *testing.T) {
		c := dial(t, s.addr)
		if _, err := c.nc.Write([]byte{0, 0, 0, 100, 0, 18, 0, 0}); err != nil {
			t.Fatal(err)
		}
		c.nc.Close() // mid-frame
		good.do(kmsg.NewPtrApiVersionsRequest())
	})
	if n := s.Stats().ProtocolErrors.Load(); n < int64(len(cases)) {
		t.Fatalf("protocol errors counted %d, want >= %d", n, len(cases))
	}
}

func TestShutdownDrainsInFlight(t *testing.T) {
	s := startServer(t, Config{}, nil)
	c := dial(t, s.addr)
	mustCreateTopic(t, c, "drain", 1, nil)
	// A long poll in flight returns early at shutdown, with a response.
	corr := c.send(fetchReq(12, "drain", 0, 0, 30000, 1))
	time.Sleep(50 * time.Millisecond)
	done := make(chan struct{})
	go func() {
		defer close(done)
		resp := kmsg.NewPtrFetchResponse()
		resp.Version = 12
		c.recv(corr, resp)
	}()
	start := time.Now()
	ctxDone := make(chan struct{})
	go func() {
		defer close(ctxDone)
		ctx, cancel := contextWithTimeout(5 * time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
	}()
	<-done
	<-ctxDone
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("shutdown took %v", d)
	}
}
