package pulsar

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"

	"github.com/nereusstream/nereus-go/cluster"
	"github.com/nereusstream/nereus-go/internal/testserver"
	"github.com/nereusstream/nereus-go/metadata/memstore"
	"github.com/nereusstream/nereus-go/stream/streammem"
)

// broker is the server under test: by default a real `nereus serve`
// process (durable core, its own data dir, started through
// internal/testserver, so a crash is a real SIGKILL); in-process over
// in-memory storage with NEREUS_PULSAR_INPROCESS=1; or an external one when
// NEREUS_PULSAR_URL (and NEREUS_PULSAR_HTTP_URL) are set.
type broker struct {
	URL, HTTPURL string
	external     bool
	proc         *testserver.Server

	storage *streammem.Storage
	meta    *memstore.Store
	srv     *Server
	ln      net.Listener
	hsrv    *http.Server
	addr    string
	cfg     Config
	// node is the broker's cluster membership on meta (nodeID kept across
	// restarts, as a data dir would keep it).
	node   *cluster.Node
	nodeID string
}

var topicSeq, nodeSeq atomic.Int64

func newTopic(prefix string) string {
	return fmt.Sprintf("persistent://public/default/%s-%d-%d", prefix, time.Now().UnixNano()%1e9, topicSeq.Add(1))
}

func testLogger() *slog.Logger {
	if os.Getenv("NEREUS_TEST_VERBOSE") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

func startBroker(t testing.TB, cfg Config) *broker {
	t.Helper()
	if u := os.Getenv("NEREUS_PULSAR_URL"); u != "" {
		return &broker{URL: u, HTTPURL: os.Getenv("NEREUS_PULSAR_HTTP_URL"), external: true}
	}
	if os.Getenv("NEREUS_PULSAR_INPROCESS") != "1" && reflect.DeepEqual(cfg, Config{}) {
		ts := testserver.Start(t, testserver.Options{DisableKafka: true})
		return &broker{URL: "pulsar://" + ts.PulsarAddr(), HTTPURL: ts.URL(), external: true, proc: ts}
	}
	return startInProcessBroker(t, cfg)
}

// startInProcessBroker always runs the front end in this process (tests
// that look at the broker's internals).
func startInProcessBroker(t testing.TB, cfg Config) *broker {
	t.Helper()
	b := &broker{storage: streammem.New(), meta: memstore.New(), cfg: cfg}
	b.start(t)
	t.Cleanup(func() { b.stop(t) })
	return b
}

func (b *broker) start(t testing.TB) {
	t.Helper()
	addr := b.addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	var ln net.Listener
	var err error
	for i := 0; i < 50; i++ { // the old socket may linger briefly after a restart
		if ln, err = net.Listen("tcp", addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	b.addr = ln.Addr().String()
	hln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := b.cfg
	cfg.Logger = testLogger()
	cfg.HTTPAdvertisedURL = "http://" + hln.Addr().String()
	if b.nodeID == "" {
		b.nodeID = fmt.Sprintf("pulsar-test-%d", nodeSeq.Add(1))
	}
	if cfg.Cluster == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		id, err := cluster.ClaimKafkaBrokerID(ctx, b.meta, b.nodeID, 0)
		if err == nil {
			pa, ha := ln.Addr().(*net.TCPAddr), hln.Addr().(*net.TCPAddr)
			b.node, err = cluster.Join(ctx, cluster.Config{Metadata: b.meta, Storage: b.storage, NodeID: b.nodeID,
				KafkaBrokerID: id, Logger: cfg.Logger, Endpoints: []cluster.Endpoint{
					{Protocol: cluster.ProtocolPulsar, Listener: "default", Host: "127.0.0.1", Port: pa.Port},
					{Protocol: cluster.ProtocolHTTP, Listener: "default", Host: "127.0.0.1", Port: ha.Port}}})
		}
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		cfg.Cluster = b.node
	}
	srv, err := NewServer(cfg, b.storage, b.meta)
	if err != nil {
		t.Fatal(err)
	}
	b.srv, b.ln = srv, ln
	go func() { _ = srv.Serve(ln) }()
	b.hsrv = &http.Server{Handler: srv.HTTPHandler(), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = b.hsrv.Serve(hln) }()
	b.URL = "pulsar://" + b.addr
	b.HTTPURL = cfg.HTTPAdvertisedURL
}

func (b *broker) stop(t testing.TB) {
	if b.srv == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if b.node != nil {
		_ = b.node.Leave(ctx)
	}
	if err := b.srv.Shutdown(ctx); err != nil {
		t.Logf("shutdown: %v", err)
	}
	_ = b.hsrv.Close()
	b.srv = nil
	if b.node != nil {
		_ = b.node.Close()
		b.node = nil
	}
}

// canCrash reports whether crashAndRestart works: always in-process; for an
// external broker when NEREUS_PULSAR_RESTART_CMD names a shell command that
// kills it (e.g. SIGKILL) and starts it again on the same addresses and
// storage.
func (b *broker) canCrash() bool {
	return !b.external || b.proc != nil || os.Getenv("NEREUS_PULSAR_RESTART_CMD") != ""
}

// crash stops the broker without persisting anything (as kill -9 would)
// and starts a new one on the same address and storage.
func (b *broker) crashAndRestart(t testing.TB) {
	t.Helper()
	if b.proc != nil {
		b.proc.Kill() // SIGKILL: nothing is flushed
		b.proc.Restart()
		return
	}
	if b.external {
		out, err := exec.Command("sh", "-c", os.Getenv("NEREUS_PULSAR_RESTART_CMD")).CombinedOutput()
		if err != nil {
			t.Fatalf("NEREUS_PULSAR_RESTART_CMD: %v\n%s", err, out)
		}
		addr := strings.TrimPrefix(b.URL, "pulsar://")
		deadline := time.Now().Add(60 * time.Second)
		for {
			if nc, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
				_ = nc.Close()
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("broker at %s did not come back", addr)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	b.srv.kill()
	_ = b.hsrv.Close()
	b.srv = nil
	if b.node != nil {
		_ = b.node.Close() // a crash: nothing released
		b.node = nil
	}
	b.start(t)
}

func (b *broker) client(t testing.TB) pulsar.Client {
	t.Helper()
	c, err := pulsar.NewClient(pulsar.ClientOptions{
		URL:               b.URL,
		OperationTimeout:  30 * time.Second,
		ConnectionTimeout: 10 * time.Second,
		Logger:            plog.NewLoggerWithSlog(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func ctxT(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func contextWithTimeout(parent context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(parent, d)
}
