package outagetest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"

	"github.com/nereusstream/nereus-go/internal/testenv"
	"github.com/nereusstream/nereus-go/internal/testenv/acklog"
	"github.com/nereusstream/nereus-go/internal/testserver"
)

// The Pulsar producers run in a child process (this test binary, see
// TestMain), as in pulsar's TestProduceSurvivesCrashMidSend:
// pulsar-client-go v0.19.0 races between a producer's reconnect (grabCnx)
// and its send loop (internalSingleSend). Every PersistenceError makes the
// client close its connection and reconnect, so an outage triggers it, and
// -race would pin the client's race on this test. The child's race reports
// go to a file (GORACE log_path) and are logged, not failed on.
const pulsarClientEnv = "NEREUS_OUTAGE_PULSAR_CLIENT"

// pulsarSendTimeout is shorter than the outage (the bookie's restart alone
// takes longer), so sends made while the bookie is down fail in the
// client instead of waiting for it.
const pulsarSendTimeout = 4 * time.Second

// pulsarLoad is the parent's view of the producer process: every
// acknowledgement in an acklog, every failure with its error, and the
// send errors the broker answered with (from the client's log).
type pulsarLoad struct {
	topic   string
	acks    *acklog.Log
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	done    chan struct{}
	raceDir string

	mu           sync.Mutex
	sent, acked  int
	failures     map[string]int // error -> count
	serverErrors []string       // the broker's SEND_ERRORs as the client logged them (first few)
	nServerErrs  int
	ledger       int64
	fatal        error
}

// createPulsarTopic creates topic (a local name in public/default) on
// profile through the Pulsar admin API of srv.
func createPulsarTopic(t *testing.T, srv *testserver.Server, local, profile string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, srv.URL()+"/admin/v2/persistent/public/default/"+local,
		strings.NewReader(`{"nereus.storage.profile":"`+profile+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		t.Fatalf("create Pulsar topic %s on %s: HTTP %d %s", local, profile, resp.StatusCode, body)
	}
	return "persistent://public/default/" + local
}

// startPulsarLoad starts the producer process on topic of srv.
func startPulsarLoad(t *testing.T, srv *testserver.Server, topic string) *pulsarLoad {
	t.Helper()
	p := &pulsarLoad{topic: topic, acks: acklog.New(), done: make(chan struct{}), raceDir: t.TempDir(),
		failures: map[string]int{}, ledger: -1}
	p.cmd = exec.Command(os.Args[0], "-test.run=^$")
	p.cmd.Env = append(os.Environ(), pulsarClientEnv+"=pulsar://"+srv.PulsarAddr()+" "+topic,
		"GORACE=exitcode=0 log_path="+filepath.Join(p.raceDir, "race"))
	p.cmd.SysProcAttr = testenv.ChildProcAttr()
	p.cmd.Stderr = os.Stderr
	var err error
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.cmd.Process.Kill(); _ = p.cmd.Wait() }) // ours, by pid; a no-op after stop
	go p.read(stdout)
	return p
}

func (p *pulsarLoad) fail(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.fatal == nil {
		p.fatal = err
	}
}

func (p *pulsarLoad) err() error { p.mu.Lock(); defer p.mu.Unlock(); return p.fatal }

// read parses the producer process's lines (see runPulsarClient).
func (p *pulsarLoad) read(stdout io.Reader) {
	defer close(p.done)
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		f := strings.Fields(line)
		switch {
		case len(f) == 2 && f[0] == "sent":
			p.acks.Begin()
			p.mu.Lock()
			p.sent++
			p.mu.Unlock()
		case len(f) >= 3 && f[0] == "failed":
			p.acks.End()
			p.mu.Lock()
			p.failures[strings.Join(f[2:], " ")]++
			p.mu.Unlock()
		case len(f) == 5 && f[0] == "ack":
			p.acks.End()
			led, _ := strconv.ParseInt(f[2], 10, 64)
			entry, _ := strconv.ParseInt(f[3], 10, 64)
			idx, _ := strconv.ParseInt(f[4], 10, 32)
			p.mu.Lock()
			p.acked++
			ledger := p.ledger
			if ledger == -1 && led != -1 {
				p.ledger = led
			}
			p.mu.Unlock()
			if led == -1 && entry == -1 {
				// A resend the broker recognised as a duplicate of a
				// message stored earlier (Pulsar's -1:-1).
				if err := p.acks.AckUnplaced(p.topic, f[1]); err != nil {
					p.fail(err)
				}
				continue
			}
			if ledger != -1 && led != ledger {
				// The topic's ledger id is Nereus's, not a BookKeeper
				// ledger: the WAL moving to a new ledger must not show.
				p.fail(fmt.Errorf("message %s acknowledged on ledger %d, the topic's ledger was %d", f[1], led, ledger))
			}
			if err := p.acks.Ack(p.topic, acklog.Pos{Offset: entry, Index: int32(max(idx, 0))}, f[1]); err != nil {
				p.fail(err)
			}
		case len(f) >= 1 && f[0] == "server-error":
			p.mu.Lock()
			p.nServerErrs++
			if len(p.serverErrors) < 5 {
				p.serverErrors = append(p.serverErrors, strings.TrimPrefix(line, "server-error "))
			}
			p.mu.Unlock()
		case len(f) >= 1 && f[0] == "error":
			p.fail(fmt.Errorf("producer process: %s", line))
		}
	}
}

// counts returns (acknowledged, failed) sends so far.
func (p *pulsarLoad) counts() (acked, failed int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, n := range p.failures {
		failed += n
	}
	return p.acked, failed
}

// waitFor polls cond for up to a minute; it fails the test when the
// producer process reported a fatal error or cond never held.
func (p *pulsarLoad) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(50 * time.Millisecond) {
		if err := p.err(); err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			acked, failed := p.counts()
			t.Fatalf("Pulsar: %s: not within a minute (%d acknowledged, %d failed)", what, acked, failed)
		}
	}
}

// waitAcks waits for n more acknowledgements with a send in flight.
func (p *pulsarLoad) waitAcks(t *testing.T, what string, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := p.acks.WaitKillPoint(ctx, p.acks.Count(), n, p.err); err != nil {
		t.Fatalf("Pulsar: %s: %v", what, err)
	}
}

// stop ends the producers (they flush first, so every send made has its
// outcome) and waits for the process.
func (p *pulsarLoad) stop(t *testing.T) {
	t.Helper()
	_ = p.stdin.Close()
	select {
	case <-p.done:
	case <-time.After(time.Minute):
		t.Fatal("Pulsar producer process did not finish within a minute of being told to stop")
	}
	if err := p.cmd.Wait(); err != nil {
		t.Fatalf("Pulsar producer process: %v", err)
	}
	if reports, _ := filepath.Glob(filepath.Join(p.raceDir, "race*")); len(reports) > 0 {
		t.Logf("the Pulsar producer process (pulsar-client-go) reported %d data race(s); see pulsarClientEnv's doc", len(reports))
	}
	if err := p.err(); err != nil {
		t.Fatal(err)
	}
}

// verify checks every send's outcome and reads the topic back: every
// acknowledged message exactly at its message id, nothing twice, each
// producer's messages in send order (acklog.Verify).
func (p *pulsarLoad) verify(t *testing.T, srv *testserver.Server) {
	t.Helper()
	acked, failed := p.counts()
	p.mu.Lock()
	sent, failures := p.sent, p.failures
	p.mu.Unlock()
	if acked+failed != sent {
		t.Errorf("Pulsar: %d sends, but %d acknowledged + %d failed: some send has no outcome", sent, acked, failed)
	}
	for e, n := range failures {
		if e != "send-timeout" {
			t.Errorf("Pulsar: %d sends failed with %q, want only the client's send timeout", n, e)
		}
	}
	c, err := pulsar.NewClient(pulsar.ClientOptions{URL: "pulsar://" + srv.PulsarAddr(), OperationTimeout: 30 * time.Second,
		Logger: quietPulsarLogger(nil)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r, err := c.CreateReader(pulsar.ReaderOptions{Topic: p.topic, StartMessageID: pulsar.EarliestMessageID()})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var read []acklog.Entry
	for r.HasNext() {
		m, err := r.Next(ctx)
		if err != nil {
			t.Fatalf("Pulsar read after %d messages: %v", len(read), err)
		}
		read = append(read, acklog.Entry{Pos: acklog.Pos{Offset: m.ID().EntryID(), Index: max(m.ID().BatchIdx(), 0)}, Payload: string(m.Payload())})
	}
	if err := p.acks.Verify(p.topic, read); err != nil {
		t.Fatal(err)
	}
	// A send timeout is an unknown outcome, not a rejection: a send whose
	// append was in flight when the client gave up may still be stored
	// (at most once: Verify).
	t.Logf("Pulsar: %d sends: %d acknowledged (all read back at their ids), %d failed with the send timeout, of which %d stored anyway; %d messages read",
		sent, acked, failed, len(read)-acked, len(read))
}

// runPulsarClient is the producer process: spec is "<service URL> <topic>".
// Two producers (batching and not) send every 10 ms each and print "sent
// P" before each send, then "ack P LEDGER ENTRY BATCHIDX" or "failed P
// ERROR" when its outcome is known; "server-error ..." for every send
// error the broker answered (the client logs them, then reconnects and
// resends). They send until stdin closes, then flush and exit.
func runPulsarClient(spec string) int {
	url, topic, _ := strings.Cut(spec, " ")
	out := bufio.NewWriter(os.Stdout)
	var outMu sync.Mutex
	say := func(format string, args ...any) {
		outMu.Lock()
		fmt.Fprintf(out, format+"\n", args...)
		_ = out.Flush()
		outMu.Unlock()
	}
	c, err := pulsar.NewClient(pulsar.ClientOptions{URL: url, OperationTimeout: 30 * time.Second, ConnectionTimeout: 10 * time.Second,
		Logger: quietPulsarLogger(func(msg string) { say("server-error %s", strings.ReplaceAll(msg, "\n", " ")) })})
	if err != nil {
		say("error client %v", err)
		return 1
	}
	defer c.Close()
	ctx, stop := context.WithCancel(context.Background())
	go func() { _, _ = io.Copy(io.Discard, os.Stdin); stop() }()
	var wg sync.WaitGroup
	var producers []pulsar.Producer
	for _, batching := range []bool{false, true} {
		p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: !batching,
			SendTimeout: pulsarSendTimeout, MaxPendingMessages: 64, BatchingMaxPublishDelay: 2 * time.Millisecond})
		if err != nil {
			say("error producer %v", err)
			return 1
		}
		producers = append(producers, p)
		key := fmt.Sprintf("batching=%v", batching)
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(10 * time.Millisecond) // pacing, so the read-back stays small
			defer tick.Stop()
			for i := 0; ctx.Err() == nil; i++ {
				payload := acklog.Payload(key, i)
				say("sent %s", payload)
				p.SendAsync(context.Background(), &pulsar.ProducerMessage{Payload: []byte(payload)}, func(id pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
					switch {
					case errors.Is(err, pulsar.ErrSendTimeout):
						say("failed %s send-timeout", payload)
					case err != nil:
						say("failed %s %s", payload, strings.ReplaceAll(err.Error(), "\n", " "))
					default:
						say("ack %s %d %d %d", payload, id.LedgerID(), id.EntryID(), id.BatchIdx())
					}
				})
				select {
				case <-ctx.Done():
				case <-tick.C:
				}
			}
		}()
	}
	wg.Wait()
	for _, p := range producers {
		fctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_ = p.FlushWithCtx(fctx)
		cancel()
		p.Close()
	}
	return 0
}

// quietPulsarLogger logs the client's errors to stderr and hands every
// "Received send error from server" warning to onSendError (nil: dropped).
func quietPulsarLogger(onSendError func(string)) plog.Logger {
	return plog.NewLoggerWithSlog(slog.New(&sendErrorHandler{
		Handler: slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}), onSendError: onSendError}))
}

type sendErrorHandler struct {
	slog.Handler
	onSendError func(string)
}

func (h *sendErrorHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }

func (h *sendErrorHandler) Handle(ctx context.Context, r slog.Record) error {
	if h.onSendError != nil && strings.HasPrefix(r.Message, "Received send error from server") {
		h.onSendError(r.Message)
	}
	if r.Level >= slog.LevelError {
		return h.Handler.Handle(ctx, r)
	}
	return nil
}

func (h *sendErrorHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &sendErrorHandler{Handler: h.Handler.WithAttrs(as), onSendError: h.onSendError}
}

func (h *sendErrorHandler) WithGroup(name string) slog.Handler {
	return &sendErrorHandler{Handler: h.Handler.WithGroup(name), onSendError: h.onSendError}
}
