package kafka

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/nereusstream/nereus-go/metadata/memstore"
	"github.com/nereusstream/nereus-go/stream"
	"github.com/nereusstream/nereus-go/stream/streammem"
)

// logBuffer collects log output for assertions.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

type testServer struct {
	*Server
	addr    string
	logs    *logBuffer
	streams stream.Storage
}

func startServer(t testing.TB, cfg Config, storage stream.Storage) *testServer {
	t.Helper()
	logs := &logBuffer{}
	cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
	if cfg.MinSessionTimeout == 0 {
		cfg.MinSessionTimeout = 10 * time.Millisecond
	}
	if storage == nil {
		storage = streammem.New()
	}
	s, err := NewServer(cfg, storage, memstore.New())
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		if err := <-done; !errors.Is(err, ErrServerClosed) {
			t.Errorf("serve returned %v", err)
		}
	})
	return &testServer{Server: s, addr: ln.Addr().String(), logs: logs, streams: storage}
}

// rawClient speaks the wire protocol directly, one request at a time or
// pipelined.
type rawClient struct {
	t    testing.TB
	nc   net.Conn
	corr int32
	f    *kmsg.RequestFormatter
}

func dial(t testing.TB, addr string) *rawClient {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &rawClient{t: t, nc: nc, f: kmsg.NewRequestFormatter(kmsg.FormatterClientID("raw-test"))}
}

func (c *rawClient) send(req kmsg.Request) int32 {
	c.t.Helper()
	c.corr++
	if _, err := c.nc.Write(c.f.AppendRequest(nil, req, c.corr)); err != nil {
		c.t.Fatal(err)
	}
	return c.corr
}

// readFrame reads one response frame: correlation id and body (the header
// tag byte, if any, is left in the body).
func (c *rawClient) readFrame() (int32, []byte, error) {
	_ = c.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	var sz [4]byte
	if _, err := io.ReadFull(c.nc, sz[:]); err != nil {
		return 0, nil, err
	}
	buf := make([]byte, binary.BigEndian.Uint32(sz[:]))
	if _, err := io.ReadFull(c.nc, buf); err != nil {
		return 0, nil, err
	}
	return int32(binary.BigEndian.Uint32(buf)), buf[4:], nil
}

func (c *rawClient) recv(wantCorr int32, resp kmsg.Response) {
	c.t.Helper()
	corr, body, err := c.readFrame()
	if err != nil {
		c.t.Fatal(err)
	}
	if corr != wantCorr {
		c.t.Fatalf("correlation id %d, want %d", corr, wantCorr)
	}
	if resp.IsFlexible() && resp.Key() != 18 {
		if body[0] != 0 {
			c.t.Fatalf("response header tags %d", body[0])
		}
		body = body[1:]
	}
	if err := resp.ReadFrom(body); err != nil {
		c.t.Fatalf("decode %T v%d: %v", resp, resp.GetVersion(), err)
	}
}

func (c *rawClient) do(req kmsg.Request) kmsg.Response {
	c.t.Helper()
	corr := c.send(req)
	resp := req.ResponseKind()
	c.recv(corr, resp)
	return resp
}

// expectClosed asserts the server closed the connection.
func (c *rawClient) expectClosed() {
	c.t.Helper()
	_ = c.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	var b [1]byte
	if _, err := c.nc.Read(b[:]); err == nil {
		c.t.Fatal("connection still open")
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		c.t.Fatal("connection not closed within 5s")
	}
}

func mustCreateTopic(t testing.TB, c *rawClient, name string, partitions int32, configs map[string]string) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Version = 7
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, partitions, 1
	for k, v := range configs {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name, c.Value = k, kmsg.StringPtr(v)
		rt.Configs = append(rt.Configs, c)
	}
	req.Topics = append(req.Topics, rt)
	resp := c.do(req).(*kmsg.CreateTopicsResponse)
	if ec := resp.Topics[0].ErrorCode; ec != 0 {
		t.Fatalf("create topic %s: error %d %v", name, ec, derefStr(resp.Topics[0].ErrorMessage))
	}
}

func derefStr(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func produceReq(version, acks int16, topic string, partition int32, batch []byte) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Version = version
	req.Acks = acks
	req.TimeoutMillis = 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition = partition
	rp.Records = batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

func fetchReq(version int16, topic string, partition int32, offset int64, maxWait int32, minBytes int32) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.Version = version
	req.ReplicaID = -1
	req.MaxWaitMillis = maxWait
	req.MinBytes = minBytes
	req.MaxBytes = 1 << 20
	req.SessionEpoch = -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition = partition
	rp.FetchOffset = offset
	rp.PartitionMaxBytes = 1 << 20
	rp.CurrentLeaderEpoch = -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

func contextWithTimeout(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}
