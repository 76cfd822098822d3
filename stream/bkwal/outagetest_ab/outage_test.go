// Package outagetest stops a real bookie under load through a real
// `nereus serve` on a BookKeeper profile (issue 14 item 4, transient
// faults): while the bookie is down the BookKeeper WAL cannot write (the
// default ledgers need E=3 bookies, WQ=AQ=2, and the cluster has exactly
// 3), /healthz and /metrics say so, a Kafka produce answers
// KAFKA_STORAGE_ERROR (retriable), reads keep working; once the bookie is
// back the server resumes by itself (no restart) and every acknowledged
// append reads back exactly once at its offset, in order per writer.
//
// The package starts a private cluster (bktest NeedControl): stopping a
// bookie of the shared one would break every other package using it.
package outagetest

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/nereusstream/nereus-go/adminapi"
	"github.com/nereusstream/nereus-go/bookkeeper/bktest"
	"github.com/nereusstream/nereus-go/internal/testenv"
	"github.com/nereusstream/nereus-go/internal/testenv/restload"
	"github.com/nereusstream/nereus-go/internal/testserver"
)

var env bktest.Env

func TestMain(m *testing.M) {
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
	if n := env.NumBookies(t); n != 3 {
		testenv.SkipOrFail(t, "needs exactly 3 bookies (ledgers use E=3), the cluster has %d", n)
	}
	srv := testserver.Start(t, testserver.Options{DisablePulsar: true,
		Args: []string{"--bookkeeper-zk", env.ZK, "--bookkeeper-root", env.Root}})
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

	restarted := false
	defer func() {
		if !restarted {
			env.Run(t, "start-bookie", stopped)
		}
	}()
	env.Run(t, "stop-bookie", stopped)
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
	// error (franz-go retries it twice, then gives up with it).
	produceErr := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("during")}).FirstErr()
	if !errors.Is(produceErr, kerr.KafkaStorageError) {
		t.Errorf("Kafka produce with a bookie down: %v, want KAFKA_STORAGE_ERROR", produceErr)
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

	env.Run(t, "start-bookie", stopped)
	restarted = true
	waitHealth(t, srv, "ok", func(h adminapi.Health) bool { return h.Status == "ok" })
	progress("after the bookie came back", 100)
	if m := fetch(t, srv.URL()+"/metrics"); !strings.Contains(m, `nereus_storage_recoveries_total{component="`+component+`"}`) {
		t.Error("/metrics lacks nereus_storage_recoveries_total for " + component)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("after")}).FirstErr(); err != nil {
		t.Fatalf("Kafka produce after the bookie came back: %v", err)
	}
	stopLoad()
	wg.Wait()
	if err := load.Err(); err != nil {
		t.Fatal(err)
	}
	load.Verify(t)
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
