package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/adminapi"
	"github.com/nereusstream/nereus-go/stream"
	"github.com/nereusstream/nereus-go/stream/streammem"
)

func testConfig(t *testing.T) Config {
	cfg := DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.HTTPAddr = "127.0.0.1:0"
	cfg.KafkaAddr = ""
	cfg.PulsarAddr = ""
	cfg.ShutdownTimeout = 10 * time.Second
	return cfg
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func startTest(t *testing.T, cfg Config, opts ...Option) (*Server, *adminapi.Client) {
	t.Helper()
	s, err := Start(cfg, quietLogger(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
	})
	c, err := adminapi.NewClient("http://"+s.HTTPAddr(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return s, c
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func wantCode(t *testing.T, err error, code adminapi.Code) {
	t.Helper()
	var ae *adminapi.Error
	if !errors.As(err, &ae) || ae.Code != code {
		t.Fatalf("got error %v, want code %s", err, code)
	}
	if ae.Status != code.Status() {
		t.Fatalf("code %s came with HTTP %d, want %d", code, ae.Status, code.Status())
	}
}

func text(s string) adminapi.AppendEntry { return adminapi.AppendEntry{Text: &s} }

func TestHealthAndMetrics(t *testing.T) {
	s, c := startTest(t, testConfig(t))
	ctx := ctxT(t)
	h, err := c.Health(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if h.Status != "ok" || !h.Durable || h.Backend != "core" || h.NodeID == "" || h.Listeners["http"] != s.HTTPAddr() {
		t.Fatalf("unexpected health %+v", h)
	}
	if _, err := c.CreateStream(ctx, adminapi.CreateStreamRequest{Name: "m"}); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + s.HTTPAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		"go_goroutines", "process_cpu_seconds_total", "nereus_build_info", "nereus_storage_durable 1", "nereus_stream_appends_committed_total", "nereus_stream_commit_round_seconds_bucket",
		`nereus_admin_http_requests_total{code="201",method="POST",route="POST /v1/streams"} 1`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

func TestStreamLifecycle(t *testing.T) {
	_, c := startTest(t, testConfig(t))
	ctx := ctxT(t)

	info, err := c.CreateStream(ctx, adminapi.CreateStreamRequest{Name: "orders", Profile: "object-wal-sync-object",
		Attributes: map[string]string{"owner": "test"}, Retention: &adminapi.Retention{TimeMs: 60000}})
	if err != nil {
		t.Fatal(err)
	}
	if info.Profile != "OBJECT_WAL_SYNC_OBJECT" || info.State != "ACTIVE" || info.Retention.TimeMs != 60000 || info.Attributes["owner"] != "test" {
		t.Fatalf("create returned %+v", info)
	}
	_, err = c.CreateStream(ctx, adminapi.CreateStreamRequest{Name: "orders"})
	wantCode(t, err, adminapi.CodeStreamExists)
	_, err = c.CreateStream(ctx, adminapi.CreateStreamRequest{Name: "x", Profile: "NOPE"})
	wantCode(t, err, adminapi.CodeInvalidArgument)
	_, err = c.CreateStream(ctx, adminapi.CreateStreamRequest{})
	wantCode(t, err, adminapi.CodeInvalidArgument)

	// Append: text and binary payloads, a multi-record entry.
	resp, err := c.Append(ctx, "orders", adminapi.AppendRequest{Entries: []adminapi.AppendEntry{
		text("a"), {Payload: []byte{0, 1, 2, 255}}, {Payload: []byte("batch"), RecordCount: 3, Timestamp: 42},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Start != 0 || resp.End != 5 || fmt.Sprint(resp.Offsets) != "[0 1 2]" {
		t.Fatalf("append returned %+v", resp)
	}
	// Conditional append.
	five := int64(5)
	if _, err := c.Append(ctx, "orders", adminapi.AppendRequest{Entries: []adminapi.AppendEntry{text("b")}, ExpectedStart: &five}); err != nil {
		t.Fatal(err)
	}
	_, err = c.Append(ctx, "orders", adminapi.AppendRequest{Entries: []adminapi.AppendEntry{text("c")}, ExpectedStart: &five})
	wantCode(t, err, adminapi.CodeOffsetConflict)
	var ae *adminapi.Error
	if errors.As(err, &ae); ae.Commit != "not_committed" {
		t.Fatalf("conflict should be not_committed, got %q", ae.Commit)
	}
	_, err = c.Append(ctx, "orders", adminapi.AppendRequest{})
	wantCode(t, err, adminapi.CodeInvalidArgument)
	_, err = c.Append(ctx, "missing", adminapi.AppendRequest{Entries: []adminapi.AppendEntry{text("x")}})
	wantCode(t, err, adminapi.CodeStreamNotFound)

	// Read: whole stream, then from inside the multi-record entry.
	rr, err := c.Read(ctx, "orders", adminapi.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rr.Entries) != 4 || rr.Next != 6 || rr.EndOffset != 6 || string(rr.Entries[0].Payload) != "a" ||
		string(rr.Entries[1].Payload) != "\x00\x01\x02\xff" || rr.Entries[2].RecordCount != 3 || rr.Entries[2].Timestamp != 42 {
		t.Fatalf("read returned %+v", rr)
	}
	from := int64(3)
	rr, err = c.Read(ctx, "orders", adminapi.ReadOptions{From: &from, Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(rr.Entries) != 1 || rr.Entries[0].Offset != 2 || rr.Next != 5 {
		t.Fatalf("containing-entry read returned %+v", rr)
	}
	far := int64(99)
	_, err = c.Read(ctx, "orders", adminapi.ReadOptions{From: &far})
	wantCode(t, err, adminapi.CodeOffsetOutOfRange)

	// Describe, trim, retention, seal.
	info, err = c.DescribeStream(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	if info.EndOffset != 6 || info.CommittedBytes != 1+4+5+1 || info.Session == nil || info.Session.Epoch == 0 {
		t.Fatalf("describe returned %+v", info)
	}
	if info, err = c.Trim(ctx, "orders", 2); err != nil || info.StartOffset != 2 {
		t.Fatalf("trim: %+v %v", info, err)
	}
	zero := int64(0)
	_, err = c.Read(ctx, "orders", adminapi.ReadOptions{From: &zero})
	wantCode(t, err, adminapi.CodeOffsetOutOfRange)
	if info, err = c.SetRetention(ctx, "orders", adminapi.Retention{Bytes: 1000}); err != nil || info.Retention.Bytes != 1000 {
		t.Fatalf("retention: %+v %v", info, err)
	}
	if info, err = c.Seal(ctx, "orders"); err != nil || info.State != "SEALED" {
		t.Fatalf("seal: %+v %v", info, err)
	}
	_, err = c.Append(ctx, "orders", adminapi.AppendRequest{Entries: []adminapi.AppendEntry{text("late")}})
	wantCode(t, err, adminapi.CodeStreamSealed)

	// Delete frees the name.
	if err := c.DeleteStream(ctx, "orders"); err != nil {
		t.Fatal(err)
	}
	_, err = c.DescribeStream(ctx, "orders")
	wantCode(t, err, adminapi.CodeStreamNotFound)
	err = c.DeleteStream(ctx, "orders")
	wantCode(t, err, adminapi.CodeStreamNotFound)
	if _, err := c.CreateStream(ctx, adminapi.CreateStreamRequest{Name: "orders"}); err != nil {
		t.Fatal(err)
	}
}

func TestListPaging(t *testing.T) {
	_, c := startTest(t, testConfig(t))
	ctx := ctxT(t)
	for i := range 5 {
		if _, err := c.CreateStream(ctx, adminapi.CreateStreamRequest{Name: fmt.Sprintf("s%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.CreateStream(ctx, adminapi.CreateStreamRequest{Name: "other"}); err != nil {
		t.Fatal(err)
	}
	var names []string
	after := ""
	for range 10 {
		page, err := c.ListStreams(ctx, "s", after, 2)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range page.Streams {
			names = append(names, s.Name)
		}
		if page.Next == "" {
			break
		}
		after = page.Next
	}
	if fmt.Sprint(names) != "[s0 s1 s2 s3 s4]" {
		t.Fatalf("paged list returned %v", names)
	}
}

// Stream names may contain '/' (Pulsar topic names do): they travel
// escaped in one path segment.
func TestStreamNameWithSlashes(t *testing.T) {
	_, c := startTest(t, testConfig(t))
	ctx := ctxT(t)
	name := "persistent://public/default/t-partition-0"
	if _, err := c.CreateStream(ctx, adminapi.CreateStreamRequest{Name: name}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Append(ctx, name, adminapi.AppendRequest{Entries: []adminapi.AppendEntry{text("x")}}); err != nil {
		t.Fatal(err)
	}
	info, err := c.DescribeStream(ctx, name)
	if err != nil || info.Name != name || info.EndOffset != 1 {
		t.Fatalf("describe %q: %+v %v", name, info, err)
	}
}

func TestBadRequests(t *testing.T) {
	s, _ := startTest(t, testConfig(t))
	base := "http://" + s.HTTPAddr()
	cases := []struct {
		method, path, body string
		status             int
	}{
		{"POST", "/v1/streams", "{", 400},
		{"POST", "/v1/streams", `{"name":"a","bogus":1}`, 400},
		{"POST", "/v1/streams", `{"name":"a"} {}`, 400},
		{"POST", "/v1/streams", ``, 400},
		{"GET", "/v1/nothing", ``, 404},
		{"GET", "/v1/streams/a/entries?limit=0", ``, 400},
		{"GET", "/v1/streams/a/entries?wait=forever", ``, 400},
		{"POST", "/v1/streams/a/entries", `{"entries":[{"text":"x","payload":"eA=="}]}`, 400},
		{"POST", "/v1/streams/a/trim", `{"to":-1}`, 400},
	}
	if resp, err := http.Post(base+"/v1/streams", "application/json", strings.NewReader(`{"name":"a"}`)); err != nil || resp.StatusCode != 201 {
		t.Fatalf("create: %v %v", resp, err)
	}
	for _, tc := range cases {
		req, _ := http.NewRequest(tc.method, base+tc.path, strings.NewReader(tc.body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || !strings.Contains(string(body), `"code"`) {
			t.Errorf("%s %s %q: HTTP %d %s, want %d with an error body", tc.method, tc.path, tc.body, resp.StatusCode, body, tc.status)
		}
	}
}

func TestLongPollWakesOnAppend(t *testing.T) {
	_, c := startTest(t, testConfig(t))
	ctx := ctxT(t)
	if _, err := c.CreateStream(ctx, adminapi.CreateStreamRequest{Name: "t"}); err != nil {
		t.Fatal(err)
	}
	got := make(chan adminapi.ReadResponse, 1)
	errc := make(chan error, 1)
	go func() {
		zero := int64(0)
		rr, err := c.Read(ctx, "t", adminapi.ReadOptions{From: &zero, Wait: 15 * time.Second})
		if err != nil {
			errc <- err
			return
		}
		got <- rr
	}()
	// The long poll is either already waiting or will find the entry;
	// both must return it.
	if _, err := c.Append(ctx, "t", adminapi.AppendRequest{Entries: []adminapi.AppendEntry{text("wake")}}); err != nil {
		t.Fatal(err)
	}
	select {
	case rr := <-got:
		if len(rr.Entries) != 1 || string(rr.Entries[0].Payload) != "wake" {
			t.Fatalf("long poll returned %+v", rr)
		}
	case err := <-errc:
		t.Fatal(err)
	case <-ctx.Done():
		t.Fatal("long poll did not return")
	}
	// A long poll at the end with nothing coming returns empty after wait.
	one := int64(1)
	start := time.Now()
	rr, err := c.Read(ctx, "t", adminapi.ReadOptions{From: &one, Wait: 200 * time.Millisecond})
	if err != nil || len(rr.Entries) != 0 || rr.Next != 1 {
		t.Fatalf("empty long poll: %+v %v", rr, err)
	}
	if time.Since(start) < 150*time.Millisecond {
		t.Fatalf("long poll returned after %v, before its wait", time.Since(start))
	}
}

// fakeFrontend records its lifecycle and echoes one line per connection.
type fakeFrontend struct {
	mu       sync.Mutex
	deps     Deps
	l        net.Listener
	stopped  chan struct{}
	shutdown bool
	// storageOpenAtShutdown proves storage closes only after Shutdown.
	storageOpenAtShutdown bool
}

func (f *fakeFrontend) Serve(l net.Listener) error {
	f.mu.Lock()
	f.l = l
	f.mu.Unlock()
	for {
		conn, err := l.Accept()
		if err != nil {
			<-f.stopped
			return err
		}
		conn.Write([]byte("hello from fake\n"))
		conn.Close()
	}
}

func (f *fakeFrontend) Shutdown(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, err := f.deps.Storage.List(ctx, "", "", 1)
	f.storageOpenAtShutdown = err == nil
	f.shutdown = true
	f.l.Close()
	close(f.stopped)
	return nil
}

func (f *fakeFrontend) HTTPHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "fake http %s node=%s", r.URL.Path, f.deps.NodeID)
	})
}

func TestFrontendPlugsIn(t *testing.T) {
	fe := &fakeFrontend{stopped: make(chan struct{})}
	spec := FrontendSpec{Name: "fake", Addr: "127.0.0.1:0", HTTPPatterns: []string{"/fake/"},
		New: func(d Deps) (Frontend, error) {
			if d.Storage == nil || d.NodeID == "" || d.Registerer == nil || d.Addr == nil {
				return nil, errors.New("incomplete deps")
			}
			fe.deps = d
			return fe, nil
		}}
	disabled := FrontendSpec{Name: "off", Addr: "", New: func(Deps) (Frontend, error) { return nil, errors.New("must not be built") }}
	s, err := Start(testConfig(t), quietLogger(), WithFrontends(spec, disabled))
	if err != nil {
		t.Fatal(err)
	}
	addr := s.Listeners()["fake"]
	if addr == "" || addr != fe.deps.Addr.String() {
		t.Fatalf("listener %q, deps addr %v", addr, fe.deps.Addr)
	}
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	line, _ := io.ReadAll(conn)
	conn.Close()
	if string(line) != "hello from fake\n" {
		t.Fatalf("front end answered %q", line)
	}
	resp, err := http.Get("http://" + s.HTTPAddr() + "/fake/x")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.HasPrefix(string(body), "fake http /fake/x node=nereus-") {
		t.Fatalf("HTTP mount answered %q", body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if !fe.shutdown || !fe.storageOpenAtShutdown {
		t.Fatalf("front end shutdown=%v, storage open at its shutdown=%v", fe.shutdown, fe.storageOpenAtShutdown)
	}
}

func TestStartFailsCleanlyOnBusyPort(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	cfg := testConfig(t)
	cfg.HTTPAddr = l.Addr().String()
	if _, err := Start(cfg, quietLogger()); err == nil || !strings.Contains(err.Error(), "admin HTTP listener") {
		t.Fatalf("got %v, want an admin HTTP listener error", err)
	}
}

// closeTracker wraps streammem to observe when storage is closed relative
// to in-flight work.
type closeTracker struct {
	*streammem.Storage
	mu     sync.Mutex
	closed bool
}

func (c *closeTracker) Close() error {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	return c.Storage.Close()
}

// slowAppend delays appends so shutdown finds one in flight.
type slowAppend struct {
	*closeTracker
	entered     chan struct{}
	release     chan struct{}
	pollWaiting chan struct{}
}

func (s *slowAppend) Read(ctx context.Context, id stream.ID, from int64, opts stream.ReadOptions) (stream.ReadResult, error) {
	if opts.Wait > 0 {
		close(s.pollWaiting)
	}
	return s.closeTracker.Read(ctx, id, from, opts)
}

func (s *slowAppend) Append(ctx context.Context, sess stream.Session, req stream.AppendRequest) (stream.AppendResult, error) {
	close(s.entered)
	<-s.release
	return s.closeTracker.Append(ctx, sess, req)
}

// TestGracefulDrain: shutdown waits for an in-flight append (it commits
// and is acknowledged), ends long polls at once, answers /healthz 503
// meanwhile, and closes storage last.
func TestGracefulDrain(t *testing.T) {
	ct := &closeTracker{Storage: streammem.New()}
	slow := &slowAppend{closeTracker: ct, entered: make(chan struct{}), release: make(chan struct{}), pollWaiting: make(chan struct{})}
	s, err := Start(testConfig(t), quietLogger(), WithStorage(slow, "test", false))
	if err != nil {
		t.Fatal(err)
	}
	c, _ := adminapi.NewClient("http://"+s.HTTPAddr(), nil)
	ctx := ctxT(t)
	if _, err := c.CreateStream(ctx, adminapi.CreateStreamRequest{Name: "d"}); err != nil {
		t.Fatal(err)
	}
	type result struct {
		resp adminapi.AppendResponse
		err  error
	}
	appended := make(chan result, 1)
	go func() {
		r, err := c.Append(ctx, "d", adminapi.AppendRequest{Entries: []adminapi.AppendEntry{text("in-flight")}})
		appended <- result{r, err}
	}()
	polled := make(chan error, 1)
	go func() {
		zero := int64(0)
		_, err := c.Read(ctx, "d", adminapi.ReadOptions{From: &zero, Wait: 50 * time.Second})
		polled <- err
	}()
	<-slow.entered
	<-slow.pollWaiting

	shutdownDone := make(chan error, 1)
	go func() {
		sctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		shutdownDone <- s.Shutdown(sctx)
	}()
	// The long poll must end well before its 50s wait.
	select {
	case err := <-polled:
		if err != nil {
			t.Fatalf("drained long poll should answer (empty), got %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("long poll held up the drain")
	}
	// Storage must still be open while the append is in flight.
	ct.mu.Lock()
	closedEarly := ct.closed
	ct.mu.Unlock()
	if closedEarly {
		t.Fatal("storage closed while an append was in flight")
	}
	close(slow.release)
	r := <-appended
	if r.err != nil || r.resp.Start != 0 {
		t.Fatalf("in-flight append: %+v %v", r.resp, r.err)
	}
	if err := <-shutdownDone; err != nil {
		t.Fatal(err)
	}
	ct.mu.Lock()
	defer ct.mu.Unlock()
	if !ct.closed {
		t.Fatal("storage not closed after shutdown")
	}
}
