// Package lifecyclebench measures the physical lifecycle (issue 9) through
// a real `nereus serve` and franz-go: how the data dir's bytes follow
// retention and topic deletion (TestSpace), and catch-up read speed from
// generation objects vs from the Object WAL, materialization speed and lag
// under a produce load (TestCatchUp). Figures and commands are in
// docs/notes/issue-9.md.
//
// Nothing here runs in CI: every test skips unless its flag is given:
//
//	go test ./bench/lifecyclebench -run TestSpace -v -timeout 30m -lcbench.space [-lcbench.bytes N] [-lcbench.writerate MB/s] [-lcbench.args "--gc-grace 2s ..."]
//	go test ./bench/lifecyclebench -run TestCatchUp -v -timeout 30m -lcbench.catchup [-lcbench.backlog 512MiB]
//
// TestSpace on BookKeeper: -lcbench.profile BOOKKEEPER_WAL_ASYNC_OBJECT
// -lcbench.zk $ZK -lcbench.args "--bookkeeper-zk $ZK" counts the
// benchmark streams' ledgers in ZooKeeper every sample, how many are not
// closed, and the closed ones' summed length (zkledgers_test.go).
//
// It owns only measurement; correctness is server/lifecycletest's job.
package lifecyclebench

import (
	"context"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"math/rand"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/nereusstream/nereus-go/adminapi"
	"github.com/nereusstream/nereus-go/internal/testserver"
)

var (
	spaceFlag   = flag.Bool("lcbench.space", false, "run TestSpace")
	catchupFlag = flag.Bool("lcbench.catchup", false, "run TestCatchUp")
	totalBytes  = flag.Int64("lcbench.bytes", 2<<30, "TestSpace: bytes of record values to produce")
	backlog     = flag.Int64("lcbench.backlog", 512<<20, "TestCatchUp: backlog bytes (record values) to read back")
	loadRate    = flag.Float64("lcbench.rate", 50, "TestCatchUp: produce rate in MB/s while materializing")
	writeRate   = flag.Float64("lcbench.writerate", 0, "TestSpace: produce rate in MB/s of the write phase (0: as fast as acknowledged)")
	extraArgs   = flag.String("lcbench.args", "", "extra `nereus serve` flags (space separated)")
	recordSize  = flag.Int("lcbench.record", 16<<10, "record value size")
	batchBytes  = flag.Int("lcbench.batch", 1<<20, "producer max batch bytes (small batches make small WAL runs)")
	catchParts  = flag.Int("lcbench.partitions", 4, "TestCatchUp: partitions of the backlog topic")
	profile     = flag.String("lcbench.profile", "", "TestSpace: nereus.storage.profile of the topics (BookKeeper ones need --bookkeeper-zk in -lcbench.args)")
	cpuProfile  = flag.String("lcbench.cpuprofile", "", "TestCatchUp: write the CPU profile of each server's read phase (the restarted process) to <this>-<layout>.cpu")
	consumers   = flag.Int("lcbench.consumers", 1, "TestCatchUp: franz-go consumers reading the backlog concurrently, partitions split among them (one client keeps one fetch in flight per broker)")
	readPasses  = flag.Int("lcbench.readpasses", 1, "TestCatchUp: read passes per layout, each after a server restart (the median is the result)")
	catchLayout = flag.String("lcbench.layouts", "generations,wal", "TestCatchUp: layouts to run")
	keepLog     = flag.String("lcbench.log", "", "TestSpace: copy the server's log (debug level) to this file at the end (timestamps of retention trims, ledger retirements and deletions)")
	bkEnvDir    = flag.String("lcbench.bkenv", "", "TestSpace: BK_ENV_DIR of a scripts/bookkeeper-env.sh cluster: count its ledgers (BookieShell listledgers) every sample")
)

func serverArgs(base ...string) []string {
	if *extraArgs != "" {
		base = append(base, strings.Fields(*extraArgs)...)
	}
	return base
}

// objectBytes is the object store's bytes in a data dir: objects/ and, on
// the default --wal-object-store log, the Object WAL's log files in
// walstore/ (their zero-filled tails included: it is space they hold).
func objectBytes(dataDir string) int64 {
	return dirBytes(filepath.Join(dataDir, "objects")) + dirBytes(filepath.Join(dataDir, "walstore"))
}

func dirBytes(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

func fileBytes(p string) int64 {
	fi, err := os.Stat(p)
	if err != nil {
		return 0
	}
	return fi.Size()
}

func mb(n int64) float64 { return float64(n) / 1e6 }

func newClient(t *testing.T, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

func createTopics(t *testing.T, ctx context.Context, addr string, partitions int32, configs map[string]string, topics ...string) {
	t.Helper()
	cfg := map[string]*string{}
	for k, v := range configs {
		cfg[k] = &v
	}
	cl := newClient(t, addr)
	defer cl.Close()
	resp, err := kadm.NewClient(cl).CreateTopics(ctx, partitions, 1, cfg, topics...)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
}

// producer sends fixed-size incompressible records, round robin over
// targets, as fast as acknowledged or at a rate (bytes/s, 0 = max).
type producer struct {
	cl    *kgo.Client
	pool  [][]byte
	acked atomic.Int64 // value bytes acknowledged
	errs  atomic.Int64
	wg    sync.WaitGroup
}

func newProducer(t *testing.T, addr string) *producer {
	p := &producer{cl: newClient(t, addr, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(2*time.Millisecond),
		kgo.ProducerBatchMaxBytes(int32(*batchBytes)), kgo.MaxBufferedBytes(64<<20), kgo.ProducerBatchCompression(kgo.NoCompression()))}
	rnd := rand.New(rand.NewSource(1))
	for i := 0; i < 64; i++ {
		b := make([]byte, *recordSize)
		rnd.Read(b)
		p.pool = append(p.pool, b)
	}
	return p
}

type target struct {
	topic string
	part  int32
}

// run produces until stop returns true (checked per record); rate in
// bytes/s (0 = as fast as the client buffers allow).
func (p *producer) run(ctx context.Context, targets func() []target, rate float64, stop func(sent int64) bool) {
	start := time.Now()
	var sent int64
	for i := 0; ctx.Err() == nil && !stop(sent); i++ {
		ts := targets()
		if len(ts) == 0 {
			return
		}
		tg := ts[i%len(ts)]
		if rate > 0 {
			due := start.Add(time.Duration(float64(sent) / rate * float64(time.Second)))
			if d := time.Until(due); d > 0 {
				time.Sleep(d)
			}
		}
		v := p.pool[i%len(p.pool)]
		sent += int64(len(v))
		p.wg.Add(1)
		p.cl.Produce(ctx, &kgo.Record{Topic: tg.topic, Partition: tg.part, Value: v}, func(r *kgo.Record, err error) {
			defer p.wg.Done()
			if err != nil {
				p.errs.Add(1)
				return
			}
			p.acked.Add(int64(len(r.Value)))
		})
	}
	p.wg.Wait()
}

// TestSpace writes -lcbench.bytes through Kafka to 8 topics x 2
// partitions with retention.ms=5000 and retention.bytes=64MiB, then
// deletes half the topics while a 4 MB/s trickle keeps the other half
// alive for 60 s, then stops writing for 60 s more; it samples the data
// dir every 2 s and prints the curve.
func TestSpace(t *testing.T) {
	if !*spaceFlag {
		t.Skip("benchmark: run with -lcbench.space") // skip-ok: opt-in benchmark, not a test
	}
	srv := testserver.Start(t, testserver.Options{DisablePulsar: true, Args: serverArgs()})
	c := srv.Client()
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	const topicsN, parts = 8, 2
	const retMs, retBytes = 5000, 64 << 20
	var topics []string
	for i := 0; i < topicsN; i++ {
		topics = append(topics, fmt.Sprintf("space-%d", i))
	}
	topicCfg := map[string]string{"retention.ms": strconv.Itoa(retMs), "retention.bytes": strconv.Itoa(retBytes)}
	if *profile != "" {
		topicCfg["nereus.storage.profile"] = *profile
	}
	createTopics(t, ctx, srv.KafkaAddr(), parts, topicCfg, topics...)
	ledgers0 := countLedgers(t)
	var streamIDs []string
	for _, tp := range topics {
		for p := 0; p < parts; p++ {
			if info, err := c.DescribeStream(ctx, "kafka/"+tp+"/"+strconv.Itoa(p)); err == nil {
				streamIDs = append(streamIDs, info.ID)
			}
		}
	}
	zkc := newZKCounter(t, streamIDs)

	var mu sync.Mutex
	live := append([]string(nil), topics...)
	targets := func() []target {
		mu.Lock()
		defer mu.Unlock()
		var ts []target
		for _, tp := range live {
			for p := int32(0); p < parts; p++ {
				ts = append(ts, target{tp, p})
			}
		}
		return ts
	}
	prod := newProducer(t, srv.KafkaAddr())
	defer prod.cl.Close()

	// Sampler.
	type sample struct {
		at                        time.Duration
		phase                     string
		objects, meta, retained   int64
		window                    int64 // value bytes acknowledged in the last retention.ms (interpolated from 100 ms ack samples)
		window2s                  int64 // the pre-session-12 figure: acked since the first 2 s sample within retention.ms (≈ 4 s of data)
		pending, grace            int64 // GC's kept WAL bytes as of its last pass, and the part only the grace period keeps
		passes, duePasses         int64 // GC passes (full, and due-only ones) so far
		segs, objs, recs, streams int64
		trims                     int64
		produced                  int64
		ledgers, deletedLedgers   int64
		openLedgers, closedBytes  int64 // with -lcbench.zk: ledgers not closed, and the closed ones' summed length
		openBytes                 int64 // with -lcbench.zk: nereus_bkwal_open_ledger_bytes from /metrics (-1: not exported)
		created                   int64 // with -lcbench.zk: nereus_bkwal_ledgers_created_total from /metrics
	}
	var samples []sample
	var phase atomic.Value
	phase.Store("write")
	start := time.Now()
	type ackPoint struct {
		at    time.Time
		bytes int64
	}
	var ackHist []ackPoint // every 2 s sample (the old window figure)
	var fineMu sync.Mutex
	var fine []ackPoint // every 100 ms (the window figure)
	ackedAt := func(at time.Time) int64 {
		fineMu.Lock()
		defer fineMu.Unlock()
		i := sort.Search(len(fine), func(i int) bool { return !fine[i].at.Before(at) })
		switch {
		case i == 0:
			return 0 // before the first sample: nothing acknowledged yet
		case i == len(fine):
			return fine[len(fine)-1].bytes
		}
		a, b := fine[i-1], fine[i]
		f := float64(at.Sub(a.at)) / float64(b.at.Sub(a.at))
		return a.bytes + int64(f*float64(b.bytes-a.bytes))
	}
	sampleOnce := func() {
		now := time.Now()
		acked := prod.acked.Load()
		ackHist = append(ackHist, ackPoint{now, acked})
		var old int64
		for _, a := range ackHist {
			if now.Sub(a.at) <= retMs*time.Millisecond {
				old = a.bytes
				break
			}
		}
		s := sample{at: now.Sub(start).Round(100 * time.Millisecond), phase: phase.Load().(string),
			objects: objectBytes(srv.DataDir()), meta: fileBytes(filepath.Join(srv.DataDir(), "metadata.db")) + dirBytes(filepath.Join(srv.DataDir(), "metadata.log")),
			window: acked - ackedAt(now.Add(-retMs*time.Millisecond)), window2s: acked - old, produced: acked}
		mu.Lock()
		names := append([]string(nil), live...)
		mu.Unlock()
		for _, tp := range names {
			for p := 0; p < parts; p++ {
				if info, err := c.DescribeStream(ctx, "kafka/"+tp+"/"+strconv.Itoa(p)); err == nil {
					s.retained += info.RetainedBytes
				}
			}
		}
		if st, err := c.GCStatus(ctx); err == nil {
			s.segs, s.objs, s.recs, s.streams, s.trims = st.Stats.DeletedSegments, st.Stats.DeletedObjects, st.Stats.DeletedRecords, st.Stats.DeletedStreams, st.Stats.RetentionTrims
			s.deletedLedgers = st.Stats.DeletedLedgers
			s.pending, s.grace = st.PendingBytes, st.GraceBytes
			s.passes, s.duePasses = st.Stats.Passes, st.Stats.DuePasses
		}
		if zkc != nil {
			zl := zkc.count() // the benchmark's own streams' ledgers, deleted topics' included
			s.ledgers, s.openLedgers, s.closedBytes = zl.n, zl.open, zl.closedBytes
			s.openBytes, s.created = bkwalGauges(srv)
		} else {
			s.ledgers = countLedgers(t) - ledgers0
		}
		samples = append(samples, s)
	}
	sctx, stopSampling := context.WithCancel(ctx)
	samplerDone := make(chan struct{})
	fineDone := make(chan struct{})
	go func() {
		defer close(fineDone)
		tk := time.NewTicker(100 * time.Millisecond)
		defer tk.Stop()
		for {
			fineMu.Lock()
			fine = append(fine, ackPoint{time.Now(), prod.acked.Load()})
			fineMu.Unlock()
			select {
			case <-sctx.Done():
				return
			case <-tk.C:
			}
		}
	}()
	go func() {
		defer close(samplerDone)
		tk := time.NewTicker(2 * time.Second)
		defer tk.Stop()
		for {
			sampleOnce()
			select {
			case <-sctx.Done():
				return
			case <-tk.C:
			}
		}
	}()

	pid := srv.Pid()
	costs := []phaseCost{readCost(t, srv, pid, "start")}
	prod.run(ctx, targets, *writeRate*1e6, func(sent int64) bool { return sent >= *totalBytes })
	writeEnd := time.Since(start)
	costs = append(costs, readCost(t, srv, pid, "write"))
	// Delete half the topics; a trickle keeps the others alive.
	phase.Store("deleted+trickle")
	mu.Lock()
	deleted := live[: topicsN/2 : topicsN/2]
	live = append([]string(nil), live[topicsN/2:]...)
	mu.Unlock()
	admCl := newClient(t, srv.KafkaAddr())
	if resp, err := kadm.NewClient(admCl).DeleteTopics(ctx, deleted...); err != nil || resp.Error() != nil {
		t.Fatalf("delete topics: %v %v", err, resp.Error())
	}
	admCl.Close()
	deleteAt := time.Since(start)
	trickleStart := time.Now()
	prod.run(ctx, targets, 4e6, func(int64) bool { return time.Since(trickleStart) > 60*time.Second })
	costs = append(costs, readCost(t, srv, pid, "deleted+trickle"))
	phase.Store("idle")
	time.Sleep(60 * time.Second)
	stopSampling()
	<-samplerDone
	<-fineDone
	costs = append(costs, readCost(t, srv, pid, "idle"))
	for i := 1; i < len(costs); i++ {
		t.Logf("cost of phase %s: %s", costs[i].phase, costs[i].minus(costs[i-1]))
	}
	t.Logf("cost of the whole run: %s", costs[len(costs)-1].minus(costs[0]))

	t.Logf("produced %.0f MB of values in %v (%.1f MB/s), %d produce errors; deleted topics %v at %v",
		mb(*totalBytes), writeEnd.Round(time.Second), mb(*totalBytes)/writeEnd.Seconds(), prod.errs.Load(), deleted, deleteAt.Round(time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "| t (s) | phase | objects/ + walstore/ MB | metadata MB | retained (live streams) MB | acked in last 5 s MB | objects ÷ window | GC pending / of it in grace MB | GC deleted segments / gen objects / records / streams | retention trims | ledgers (new in ZK / deleted) | ledgers not closed / closed ones' MB (-lcbench.zk) | open ledgers' MB (/metrics) | (closed + open) ÷ window | ledgers created |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	var peak int64
	var maxRate float64
	for i, s := range samples {
		peak = max(peak, s.objects)
		ratio := "-"
		if s.window > 0 {
			ratio = fmt.Sprintf("%.2f", float64(s.objects)/float64(s.window))
		}
		if i > 0 {
			p := samples[i-1]
			dt := (s.at - p.at).Seconds()
			if dt > 0 {
				maxRate = max(maxRate, float64((s.segs+s.objs+s.recs)-(p.segs+p.objs+p.recs))/dt)
			}
		}
		open, held := "-", "-"
		if s.openBytes >= 0 && zkc != nil {
			open = fmt.Sprintf("%.1f", mb(s.openBytes))
			if s.window >= 1e6 { // not once the writes have stopped
				held = fmt.Sprintf("%.2f", float64(s.closedBytes+s.openBytes)/float64(s.window))
			}
		}
		fmt.Fprintf(&b, "| %.0f | %s | %.1f | %.1f | %.1f | %.1f | %s | %.1f / %.1f | %d / %d / %d / %d | %d | %d / %d | %d / %.1f | %s | %s | %d |\n", s.at.Seconds(), s.phase, mb(s.objects), mb(s.meta), mb(s.retained), mb(s.window), ratio, mb(s.pending), mb(s.grace), s.segs, s.objs, s.recs, s.streams, s.trims, s.ledgers, s.deletedLedgers, s.openLedgers, mb(s.closedBytes), open, held, s.created)
	}
	t.Logf("curve:\n%s", b.String())
	last := samples[len(samples)-1]
	t.Logf("peak objects/ + walstore/ %.1f MB; at end %.1f MB; metadata %.1f MB; GC peak %.0f deletions/s (segments+generation objects+records, per 2 s sample)",
		mb(peak), mb(last.objects), mb(last.meta), maxRate)
	// Steady states: the write from 8 s on (the window is full), the
	// trickle from 10 s after the delete (the deleted half is gone).
	summary := func(name string, keep func(sample) bool) {
		var n int
		var sum, mx, rsum, rmx, osum, omx, retSum, penSum, graceSum float64
		var ledSum, ledMax, openSum, closedSum, closedMax, winSum float64
		var heldSum, heldMax, heldRSum, heldRMax float64 // closed + open ledger bytes (MB) and ÷ window
		haveOpen := true
		var first, last sample
		for _, s := range samples {
			if !keep(s) || s.window <= 0 || s.window2s <= 0 {
				continue
			}
			if n == 0 {
				first = s
			}
			last = s
			n++
			o, r, or := mb(s.objects), float64(s.objects)/float64(s.window), float64(s.objects)/float64(s.window2s)
			sum, mx, rsum, rmx, osum, omx = sum+o, max(mx, o), rsum+r, max(rmx, r), osum+or, max(omx, or)
			retSum, penSum, graceSum = retSum+mb(s.retained), penSum+mb(s.pending), graceSum+mb(s.grace)
			ledSum, ledMax, openSum = ledSum+float64(s.ledgers), max(ledMax, float64(s.ledgers)), openSum+float64(s.openLedgers)
			closedSum, closedMax, winSum = closedSum+mb(s.closedBytes), max(closedMax, mb(s.closedBytes)), winSum+mb(s.window)
			if s.openBytes < 0 {
				haveOpen = false
			} else {
				h := mb(s.closedBytes + s.openBytes)
				hr := float64(s.closedBytes+s.openBytes) / float64(s.window)
				heldSum, heldMax, heldRSum, heldRMax = heldSum+h, max(heldMax, h), heldRSum+hr, max(heldRMax, hr)
			}
		}
		if n > 0 {
			fn := float64(n)
			secs := (last.at - first.at).Seconds()
			t.Logf("SPACE %s: objects/ + walstore/ mean %.0f MB, max %.0f MB; ÷ window (5 s acked) mean %.2f, max %.2f; ÷ the pre-session-12 window figure (≈ 4 s) mean %.2f, max %.2f; mean live retained %.0f MB, GC pending %.0f MB of which in grace %.0f MB; GC passes full %d / due-only %d in %.0f s (%d samples)",
				name, sum/fn, mx, rsum/fn, rmx, osum/fn, omx, retSum/fn, penSum/fn, graceSum/fn, last.passes-first.passes, last.duePasses-first.duePasses, secs, n)
			if zkc != nil {
				t.Logf("SPACE %s ledgers (ZooKeeper, the benchmark's streams): mean %.1f, max %.0f, of which not closed (length not in ZooKeeper) mean %.1f; closed ledgers' length mean %.0f MB, max %.0f MB (per replica; ÷ window mean %.2f); GC deleted %d ledgers in %.0f s",
					name, ledSum/fn, ledMax, openSum/fn, closedSum/fn, closedMax, closedSum/winSum, last.deletedLedgers-first.deletedLedgers, secs)
				rate := "-"
				if secs > 0 {
					rate = fmt.Sprintf("%.1f", float64(last.created-first.created)/secs)
				}
				if haveOpen {
					t.Logf("SPACE %s held in ledgers (closed, from ZooKeeper, + open, nereus_bkwal_open_ledger_bytes): mean %.0f MB, max %.0f MB per replica; (closed + open) ÷ window mean %.2f, max %.2f (per sample); ledgers created %s/s",
						name, heldSum/fn, heldMax, heldRSum/fn, heldRMax, rate)
				} else {
					t.Logf("SPACE %s held in ledgers: the server does not export nereus_bkwal_open_ledger_bytes (open ledgers' bytes unknown); ledgers created %s/s", name, rate)
				}
			}
		}
	}
	summary("steady write", func(s sample) bool { return s.phase == "write" && s.at >= 8*time.Second })
	summary("trickle", func(s sample) bool { return s.phase == "deleted+trickle" && s.at >= deleteAt+10*time.Second })
	if *keepLog != "" {
		if b, err := os.ReadFile(srv.LogPath()); err != nil {
			t.Errorf("keeping the server log: %v", err)
		} else if err := os.WriteFile(*keepLog, b, 0o644); err != nil {
			t.Errorf("keeping the server log: %v", err)
		}
	}
}

// bkwalGauges scrapes the server's /metrics for the bytes in its open
// (unsealed) ledgers — -1 when the server does not export them — and the
// ledgers it has created.
func bkwalGauges(srv *testserver.Server) (openBytes, created int64) {
	openBytes = -1
	resp, err := http.Get(srv.URL() + "/metrics")
	if err != nil {
		return openBytes, 0
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(body), "\n") {
		sp := strings.LastIndexByte(line, ' ')
		if sp < 0 || strings.HasPrefix(line, "#") {
			continue
		}
		name := line[:strings.IndexAny(line, "{ ")]
		v, err := strconv.ParseFloat(line[sp+1:], 64)
		if err != nil {
			continue
		}
		switch name {
		case "nereus_bkwal_open_ledger_bytes":
			openBytes = max(openBytes, 0) + int64(v)
		case "nereus_bkwal_ledgers_created_total":
			created += int64(v)
		}
	}
	return openBytes, created
}

// phaseCost is what the server had spent by the end of a phase: CPU
// seconds, I/O syscalls and bytes (/proc/<pid>/io) and object-store
// operations (/metrics), to weigh lifecycle settings by what they cost.
type phaseCost struct {
	phase         string
	cpu           float64
	syscr, syscw  int64
	readB, writeB int64
	ops           map[string]float64 // object-store operations by operation
}

func readCost(t *testing.T, srv *testserver.Server, pid int, phase string) phaseCost {
	pc := phaseCost{phase: phase, cpu: procCPU(pid), ops: map[string]float64{}}
	if b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/io"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			k, v, ok := strings.Cut(line, ": ")
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			switch {
			case !ok:
			case k == "syscr":
				pc.syscr = n
			case k == "syscw":
				pc.syscw = n
			case k == "read_bytes":
				pc.readB = n
			case k == "write_bytes":
				pc.writeB = n
			}
		}
	}
	resp, err := http.Get(srv.URL() + "/metrics")
	if err != nil {
		t.Logf("metrics: %v", err)
		return pc
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(line, "nereus_objectstore_operations_total{") {
			continue
		}
		i := strings.Index(line, `operation="`)
		sp := strings.LastIndexByte(line, ' ')
		if i < 0 || sp < 0 {
			continue
		}
		op := line[i+len(`operation="`):]
		op = op[:strings.IndexByte(op, '"')]
		v, _ := strconv.ParseFloat(line[sp+1:], 64)
		pc.ops[op] += v
	}
	return pc
}

func (c phaseCost) minus(o phaseCost) string {
	var ops []string
	for k, v := range c.ops {
		if d := v - o.ops[k]; d > 0 {
			ops = append(ops, fmt.Sprintf("%s %.0f", k, d))
		}
	}
	sort.Strings(ops)
	return fmt.Sprintf("server %.1f CPU-s, %d read / %d write syscalls, %.0f MB read / %.0f MB written to disk, object-store ops: %s; load %s",
		c.cpu-o.cpu, c.syscr-o.syscr, c.syscw-o.syscw, mb(c.readB-o.readB), mb(c.writeB-o.writeB), strings.Join(ops, ", "), loadAvg())
}

// countLedgers is the number of ledgers in the -lcbench.bkenv cluster
// (0 without one). It lists every ledger of the cluster, so TestSpace
// reports the difference from its start.
func countLedgers(t *testing.T) int64 {
	if *bkEnvDir == "" {
		return 0
	}
	root, _ := filepath.Abs("../..")
	cmd := exec.Command("bash", filepath.Join(root, "scripts", "bookkeeper-env.sh"), "shell", "listledgers")
	cmd.Env = append(os.Environ(), "BK_ENV_DIR="+*bkEnvDir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Logf("listledgers: %v", err)
		return 0
	}
	return int64(strings.Count(string(out), "ledgerID:"))
}

// TestCatchUp: a backlog of -lcbench.backlog bytes in one topic (4
// partitions), on a server that materializes (generations) and on one
// that does not (every read from Object WAL segments); each server is
// restarted before the read (no tail cache, no cached footers), then a
// fresh franz-go consumer reads everything from offset 0. Compared with a
// plain sequential read of a file of the same size on the same disk. The
// materializing server's backlog is produced at -lcbench.rate MB/s and
// its materialization speed and lag are sampled meanwhile.
func TestCatchUp(t *testing.T) {
	if !*catchupFlag {
		t.Skip("benchmark: run with -lcbench.catchup") // skip-ok: opt-in benchmark, not a test
	}
	parts := *catchParts
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()

	// 1. Plain file read (page cache warm: the file was just written, as
	// the servers' objects were).
	fileMBs := func() float64 {
		p := filepath.Join(t.TempDir(), "seq")
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 1<<20)
		rand.New(rand.NewSource(2)).Read(buf)
		for n := int64(0); n < *backlog; n += int64(len(buf)) {
			if _, err := f.Write(buf); err != nil {
				t.Fatal(err)
			}
		}
		f.Close()
		f, _ = os.Open(p)
		defer f.Close()
		st := time.Now()
		n, err := io.CopyBuffer(io.Discard, f, make([]byte, 1<<20))
		if err != nil {
			t.Fatal(err)
		}
		return mb(n) / time.Since(st).Seconds()
	}()
	t.Logf("sequential file read of %.0f MB: %.0f MB/s", mb(*backlog), fileMBs)

	run := func(label string, rate float64, args ...string) (readMBs float64) {
		var env []string
		if *cpuProfile != "" {
			// Every start truncates the file: what remains is the profile
			// of the restarted process, i.e. of the read phase.
			env = append(env, "NEREUS_DEBUG_CPU_PROFILE="+*cpuProfile+"-"+label+".cpu")
		}
		srv := testserver.Start(t, testserver.Options{DisablePulsar: true, Args: serverArgs(args...), Env: env})
		c := srv.Client()
		topic := "catchup-" + label
		createTopics(t, ctx, srv.KafkaAddr(), int32(parts), nil, topic)
		prod := newProducer(t, srv.KafkaAddr())
		var ts []target
		for p := int32(0); p < int32(parts); p++ {
			ts = append(ts, target{topic, p})
		}
		// Sample materialization while producing.
		sctx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		var maxLagB, maxLagS int64
		go func() {
			defer close(done)
			for sctx.Err() == nil {
				if st, err := c.GCStatus(ctx); err == nil {
					maxLagB, maxLagS = max(maxLagB, st.Stats.MaterializeLagBytes), max(maxLagS, st.Stats.MaterializeLagSeconds)
				}
				time.Sleep(time.Second)
			}
		}()
		st := time.Now()
		prod.run(ctx, func() []target { return ts }, rate*1e6, func(sent int64) bool { return sent >= *backlog })
		prodDur := time.Since(st)
		prod.cl.Close()
		// Wait for materialization to reach the end (generation server).
		matDone := time.Duration(0)
		gen0, _ := c.GCStatus(ctx)
		if label == "generations" {
			for {
				all := true
				for p := 0; p < parts; p++ {
					info, err := c.DescribeStream(ctx, "kafka/"+topic+"/"+strconv.Itoa(p))
					if err != nil || info.MaterializedThrough < info.EndOffset {
						all = false
					}
				}
				if all {
					break
				}
				if time.Since(st) > 10*time.Minute {
					t.Fatalf("not materialized within 10m")
				}
				time.Sleep(500 * time.Millisecond)
			}
			matDone = time.Since(st)
		}
		stop()
		<-done
		gst, _ := c.GCStatus(ctx)
		t.Logf("%s: produced %.0f MB in %v (%.1f MB/s, %d errors); materialized %.0f MB in %d generations, %.1f s of materializer time (%.0f MB/s per task-second); caught up %v after produce start; max lag %.1f MB / %d s",
			label, mb(prod.acked.Load()), prodDur.Round(100*time.Millisecond), mb(prod.acked.Load())/prodDur.Seconds(), prod.errs.Load(),
			mb(gst.Stats.MaterializedBytes), gst.Stats.Materialized, gst.Stats.MaterializeSeconds,
			mb(gst.Stats.MaterializedBytes)/max(gst.Stats.MaterializeSeconds, 1e-9), matDone.Round(100*time.Millisecond), mb(maxLagB), maxLagS)
		_ = gen0
		t.Logf("%s: data dir objects/ + walstore/ %.0f MB", label, mb(objectBytes(srv.DataDir())))
		var passMBs []float64
		for pass := range max(*readPasses, 1) {
			srv.Restart() // fresh process: no tail cache, no footers
			mbs := readBacklog(t, ctx, srv, topic, parts)
			t.Logf("%s pass %d: %.0f MB/s; load %s", label, pass+1, mbs, loadAvg())
			passMBs = append(passMBs, mbs)
		}
		srv.Stop()
		sort.Float64s(passMBs)
		return passMBs[len(passMBs)/2]
	}
	has := func(l string) bool { return strings.Contains(","+*catchLayout+",", ","+l+",") }
	var gen, wal float64
	if has("generations") {
		gen = run("generations", *loadRate, "--generation-max-age", "5s")
	}
	if has("wal") {
		wal = run("wal", 0, "--generation-max-age", "100000h", "--generation-bytes", "1024GiB")
	}
	t.Logf("catch-up: generations %.0f MB/s, WAL %.0f MB/s (%.2fx), file %.0f MB/s (generations = %.0f%% of it); load %s", gen, wal, gen/wal, fileMBs, 100*gen/fileMBs, loadAvg())
}

func loadAvg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	if len(b) > 14 {
		b = b[:14]
	}
	return string(b)
}

// procCPU is a process's user+system CPU seconds (/proc/<pid>/stat).
func procCPU(pid int) float64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100 // USER_HZ
}

// readBacklog reads every partition of topic from offset 0 to its end with
// *consumers franz-go clients (partitions split round-robin among them,
// all reading at once) and returns MB/s of record values. It logs the
// server's and this process's CPU seconds over the read.
func readBacklog(t *testing.T, ctx context.Context, srv *testserver.Server, topic string, parts int) float64 {
	c := srv.Client()
	n := max(min(*consumers, parts), 1)
	offs := make([]map[int32]kgo.Offset, n)
	ends := map[int32]int64{}
	for p := range parts {
		if offs[p%n] == nil {
			offs[p%n] = map[int32]kgo.Offset{}
		}
		offs[p%n][int32(p)] = kgo.NewOffset().At(0)
		info, err := c.DescribeStream(ctx, "kafka/"+topic+"/"+strconv.Itoa(p))
		if err != nil {
			t.Fatal(err)
		}
		ends[int32(p)] = info.EndOffset
	}
	clients := make([]*kgo.Client, n)
	for i := range clients {
		clients[i] = newClient(t, srv.KafkaAddr(), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offs[i]}),
			kgo.FetchMaxBytes(64<<20), kgo.FetchMaxPartitionBytes(16<<20))
		defer clients[i].Close()
	}
	var got atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, n)
	pid := srv.Pid()
	srv0, me0 := procCPU(pid), selfCPU()
	rst := time.Now()
	for i, cons := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			next := map[int32]int64{}
			for {
				all := true
				for p := range offs[i] {
					if next[p] < ends[p] {
						all = false
					}
				}
				if all {
					return
				}
				fs := cons.PollFetches(ctx)
				if ctx.Err() != nil {
					errs <- fmt.Errorf("read timed out")
					return
				}
				var ferr error
				fs.EachError(func(_ string, p int32, err error) { ferr = fmt.Errorf("fetch %d: %w", p, err) })
				if ferr != nil {
					errs <- ferr
					return
				}
				var sum int64
				fs.EachRecord(func(r *kgo.Record) { sum += int64(len(r.Value)); next[r.Partition] = r.Offset + 1 })
				got.Add(sum)
			}
		}()
	}
	wg.Wait()
	d := time.Since(rst)
	srvCPU, meCPU := procCPU(pid)-srv0, selfCPU()-me0
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	mbs := mb(got.Load()) / d.Seconds()
	t.Logf("%d fresh consumer(s) read %.0f MB from offset 0 in %v: %.0f MB/s; server %.2f CPU-s (%.2f per GB), consumers %.2f CPU-s (%.2f per GB)",
		n, mb(got.Load()), d.Round(10*time.Millisecond), mbs, srvCPU, srvCPU/(mb(got.Load())/1e3), meCPU, meCPU/(mb(got.Load())/1e3))
	return mbs
}

// selfCPU is this process's user+system CPU seconds.
func selfCPU() float64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

var _ = adminapi.GCStats{}
