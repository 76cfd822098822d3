// Package outagetest stops a real bookie under load through a real
// `nereus serve` on a BookKeeper profile (issue 14 item 4, transient
// faults): while the bookie is down the BookKeeper WAL cannot write (the
// default ledgers need E=3 bookies, WQ=AQ=2, and the cluster has exactly
// 3), /healthz and /metrics say so, a Kafka produce answers
// KAFKA_STORAGE_ERROR (retriable), Pulsar producers get PersistenceError
// (the client reconnects and resends) and their sends fail with the
// client's send timeout, reads keep working; once the bookie is back the
// server resumes by itself (same process, no restart) and every
// acknowledged append — REST and Pulsar — reads back exactly once at its
// offset / message id, in order per writer.
//
// The package starts a private cluster (bktest NeedControl): stopping a
// bookie of the shared one would break every other package using it.
package outagetest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/nereusstream/nereus-go/adminapi"
	"github.com/nereusstream/nereus-go/bookkeeper"
	"github.com/nereusstream/nereus-go/bookkeeper/bktest"
	"github.com/nereusstream/nereus-go/internal/testenv"
	"github.com/nereusstream/nereus-go/internal/testenv/restload"
	"github.com/nereusstream/nereus-go/internal/testserver"
)

var env bktest.Env

func TestMain(m *testing.M) {
	if spec := os.Getenv(pulsarClientEnv); spec != "" {
		os.Exit(runPulsarClient(spec)) // this binary as the Pulsar producer process
	}
	env.NeedControl = true
	os.Exit(env.Main(m))
}

const (
	profile   = "BOOKKEEPER_WAL_ONLY"
	component = "bookkeeper" // bkwal.Name, as /healthz names it
	stopped   = "1"          // the bookie the test stops
)

func TestServeSurvivesBookieOutage(t *testing.T) {
	env.RequireControl(t)
	began := time.Now()
	phase := func(what string) { t.Logf("%6.1fs %s", time.Since(began).Seconds(), what) }
	if n := env.NumBookies(t); n != 3 {
		testenv.SkipOrFail(t, "needs exactly 3 bookies (ledgers use E=3), the cluster has %d", n)
	}
	srv := testserver.Start(t, testserver.Options{
		Args: []string{"--bookkeeper-zk", env.ZK, "--bookkeeper-root", env.Root}})
	pid := srv.Pid()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := srv.Client()
	const name = "bk-outage"
	if _, err := c.CreateStream(ctx, adminapi.CreateStreamRequest{Name: name, Profile: profile}); err != nil {
		t.Fatal(err)
	}
	load := restload.New(c, name)

	// A Kafka topic on the same profile, to produce to while the bookie
	// is down.
	const topic = "bk-outage-k"
	cl, err := kgo.NewClient(kgo.SeedBrokers(srv.KafkaAddr()), kgo.DefaultProduceTopic(topic),
		kgo.RecordRetries(2), kgo.RecordDeliveryTimeout(20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	prof := profile
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, map[string]*string{"nereus.storage.profile": &prof}, topic); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("before")}).FirstErr(); err != nil {
		t.Fatalf("Kafka produce before the outage: %v", err)
	}

	// Pulsar producers on a topic of the same profile, sending throughout.
	pl := startPulsarLoad(t, srv, createPulsarTopic(t, srv, "bk-outage-p", profile))

	lctx, stopLoad := context.WithCancel(context.Background())
	wg := load.Run(lctx, 0, 4)
	defer func() { stopLoad(); wg.Wait() }()
	progress := func(what string, n int) {
		t.Helper()
		pctx, pcancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer pcancel()
		if err := load.Acks.WaitKillPoint(pctx, load.Acks.Count(), n, load.Err); err != nil {
			t.Fatalf("%s: %v (health %+v)", what, err, health(srv))
		}
	}
	progress("before the outage", 100)
	pl.waitAcks(t, "before the outage", 50)
	phase("before the outage: load running")

	restarted := false
	defer func() {
		if !restarted {
			env.Run(t, "start-bookie", stopped)
		}
	}()
	_, failedAtStop := pl.counts()
	stoppedID := env.BookieID(t, 1) // bookie `stopped`
	env.Run(t, "stop-bookie", stopped)
	phase("bookie stopped")
	waitUnregistered(t, stoppedID)
	ackedAtStop := load.Acks.Count()
	h := waitHealth(t, srv, "degraded", func(h adminapi.Health) bool {
		for _, d := range h.Degraded {
			if d.Component == component {
				return true
			}
		}
		return false
	})
	t.Logf("degraded: %+v (%d appends acknowledged when the bookie stopped, %d now)", h.Degraded, ackedAtStop, load.Acks.Count())
	want := `nereus_storage_degraded{component="` + component + `"} 1`
	if m := fetch(t, srv.URL()+"/metrics"); !strings.Contains(m, want) {
		t.Errorf("/metrics lacks %s while /healthz says %s is degraded", want, component)
	}

	// The producer halts: a Kafka produce gets the retriable storage
	// error (franz-go retries it twice, then gives up with it). But the
	// topic's ledger (E=3, WQ=2) still takes an entry whose write quorum
	// avoids the stopped bookie, until an entry needs it: a produce may be
	// acknowledged, rightly, once or twice, and must then read back; three
	// would be no outage at all.
	kafkaAcked := []string{"before"}
	for i := 0; ; i++ {
		v := fmt.Sprintf("during-%d", i)
		err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(v)}).FirstErr()
		if errors.Is(err, kerr.KafkaStorageError) {
			break
		}
		if err != nil {
			t.Errorf("Kafka produce with a bookie down: %v, want KAFKA_STORAGE_ERROR", err)
			break
		}
		t.Logf("Kafka produce %q acknowledged with the bookie down", v)
		kafkaAcked = append(kafkaAcked, v)
		if i == 2 {
			t.Errorf("Kafka produce with a bookie down: 3 acknowledged, want KAFKA_STORAGE_ERROR")
			break
		}
	}
	// Nothing is acknowledged while the bookie is down (bounded: a few
	// appends may have been in flight when the check started).
	stalled := load.Acks.Count()
	time.Sleep(2 * time.Second) // a window to observe no progress in, not synchronisation
	if d := load.Acks.Count() - stalled; d > 8 {
		t.Errorf("%d appends acknowledged within 2 s while the BookKeeper WAL is degraded", d)
	}
	// Reads keep working: through REST (every entry still has a copy on
	// a live bookie: WQ=2 of 3) and through Kafka.
	from := int64(0)
	rr, err := c.Read(ctx, name, adminapi.ReadOptions{From: &from, Limit: 50})
	if err != nil || len(rr.Entries) == 0 {
		t.Errorf("REST read with a bookie down: %d entries, %v", len(rr.Entries), err)
	}
	consumeOne(t, srv, topic, "before")
	phase("degraded; Kafka and REST checks done")
	// Pulsar: the broker answers PersistenceError (the client logs it,
	// reconnects and resends), and a send still unacknowledged after the
	// send timeout fails in the client (by now, usually: the checks above
	// outlast pulsarSendTimeout).
	pl.waitFor(t, "a send failing with the bookie down", func() bool {
		_, failed := pl.counts()
		return failed > failedAtStop
	})
	pl.mu.Lock()
	serverErrs, nServerErrs := append([]string(nil), pl.serverErrors...), pl.nServerErrs
	pl.mu.Unlock()
	named := false
	for _, e := range serverErrs {
		named = named || strings.Contains(e, "PersistenceError") && strings.Contains(e, "storage temporarily unavailable")
	}
	if !named {
		t.Errorf("Pulsar send errors with the bookie down (%d, first %q): none is PersistenceError naming the storage", nServerErrs, serverErrs)
	} else {
		t.Logf("Pulsar with the bookie down: %d send errors from the broker, the first: %s", nServerErrs, serverErrs[0])
	}
	phase("Pulsar checks done")
	env.Run(t, "start-bookie", stopped)
	restarted = true
	phase("bookie restarted")
	waitHealth(t, srv, "ok", func(h adminapi.Health) bool { return h.Status == "ok" })
	progress("after the bookie came back", 100)
	phase("recovered: health ok, REST progress")
	if m := fetch(t, srv.URL()+"/metrics"); !strings.Contains(m, `nereus_storage_recoveries_total{component="`+component+`"}`) {
		t.Error("/metrics lacks nereus_storage_recoveries_total for " + component)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("after")}).FirstErr(); err != nil {
		t.Fatalf("Kafka produce after the bookie came back: %v", err)
	}
	consumeAll(t, srv, topic, append(kafkaAcked, "after"))
	pl.waitAcks(t, "after the bookie came back", 50)
	stopLoad()
	wg.Wait()
	pl.stop(t)
	phase("load stopped")
	if err := load.Err(); err != nil {
		t.Fatal(err)
	}
	load.Verify(t)
	pl.verify(t, srv)
	phase("verified")
	if !srv.Running() || srv.Pid() != pid {
		t.Errorf("nereus serve did not stay up: running %v, pid %d (was %d)", srv.Running(), srv.Pid(), pid)
	}
	t.Logf("%d acknowledged appends verified after the bookie outage (no restart)", load.Acks.Count())
}

// consumeOne reads the topic's first record through Kafka.
func consumeOne(t *testing.T, srv *testserver.Server, topic, want string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(srv.KafkaAddr()), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		for _, e := range fs.Errors() {
			if !errors.Is(e.Err, context.DeadlineExceeded) {
				t.Logf("fetch error (retrying): %v", e.Err)
			}
		}
		if recs := fs.Records(); len(recs) > 0 {
			if got := string(recs[0].Value); got != want {
				t.Errorf("Kafka read with a bookie down: first record %q, want %q", got, want)
			}
			return
		}
	}
	t.Error("Kafka read with a bookie down: no record within 30 s")
}

// consumeAll reads the topic through Kafka until every value in acked was
// seen, and requires each exactly once and in that order (one producer).
func consumeAll(t *testing.T, srv *testserver.Server, topic string, acked []string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(srv.KafkaAddr()), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var got []string
	for ctx.Err() == nil && !slices.Contains(got, acked[len(acked)-1]) {
		fs := cl.PollFetches(ctx)
		for _, r := range fs.Records() {
			got = append(got, string(r.Value))
		}
	}
	// A produce that failed (KAFKA_STORAGE_ERROR: not committed) is not
	// there; an acknowledged one is, once.
	var seen []string
	for _, v := range got {
		if slices.Contains(acked, v) {
			seen = append(seen, v)
		}
	}
	if !slices.Equal(seen, acked) {
		t.Errorf("Kafka topic after the outage: acknowledged %q, read %q", acked, got)
	}
}

// waitUnregistered waits (bounded) until ZooKeeper no longer lists bookie
// id as available. Until then a new ledger may still be placed on the
// stopped bookie, and its first entries whose write quorum avoids that
// bookie are acknowledged (durable on the two live ones): correct, but not
// the outage the checks below are about.
func waitUnregistered(t *testing.T, id string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	store, err := bookkeeper.DialZK(ctx, env.ZK, bookkeeper.ZKOptions{LedgersRoot: env.Root,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	start := time.Now()
	for ; ; time.Sleep(100 * time.Millisecond) {
		bs, err := store.WritableBookies(ctx)
		if err != nil {
			t.Fatalf("listing the available bookies: %v", err)
		}
		if !slices.ContainsFunc(bs, func(b bookkeeper.BookieInfo) bool { return b.ID == id }) {
			t.Logf("bookie %s unregistered %v after stop-bookie returned", id, time.Since(start).Round(10*time.Millisecond))
			return
		}
	}
}

func health(srv *testserver.Server) adminapi.Health {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	h, _ := srv.Client().Health(ctx)
	return h
}

func waitHealth(t *testing.T, srv *testserver.Server, what string, cond func(adminapi.Health) bool) adminapi.Health {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(50 * time.Millisecond) {
		if h := health(srv); cond(h) {
			return h
		}
		if time.Now().After(deadline) {
			t.Fatalf("/healthz not %s within 2 minutes: %+v", what, health(srv))
		}
	}
}

func fetch(t *testing.T, url string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
