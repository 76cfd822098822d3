// Package catchupbench measures catch-up reads at the stream core's
// Storage API (no protocol front end): a backlog written to N streams is
// read back from offset 0 by a fresh core (no tail cache, no cached
// footers or runs), once from generation objects and once from the Object
// WAL, and compared with reads of a plain file of the same size on the
// same file system (io.Copy, and a 1 MiB read(2) loop). It measures; it is
// run by flag and never asserts a time.
//
//	go test ./bench/catchupbench -run TestCatchUpCore -v -timeout 10m -catchup.run \
//	    [-catchup.objects s3] [-catchup.backlog 1073741824] [-catchup.streams 4] \
//	    [-catchup.entry 16384] [-catchup.append 64] [-catchup.parallel] [-catchup.ab-recycle] [-catchup.cold]
//
// With -catchup.cold every read (file and store) is also measured with the
// page cache dropped first (cold_test.go): a backlog that aged out of
// memory; the cold lines also give the bytes read from the device and the
// device's request sizes and queue depth.
// The plain file and the stores' data share one directory, so one file
// system. Each run deletes its data afterwards (the disk is shared).
package catchupbench

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/internal/testenv/s3test"
	"github.com/nereusstream/nereus-go/metadata/boltstore"
	"github.com/nereusstream/nereus-go/objectstore"
	"github.com/nereusstream/nereus-go/objectstore/fsstore"
	"github.com/nereusstream/nereus-go/stream"
	"github.com/nereusstream/nereus-go/stream/objectwal"
)

var (
	runFlag    = flag.Bool("catchup.run", false, "run TestCatchUpCore")
	objectsArg = flag.String("catchup.objects", "fs", "object store: fs (fsstore) or s3 (versitygw, internal/testenv/s3test)")
	backlog    = flag.Int64("catchup.backlog", 1<<30, "backlog bytes (entry payloads) per layout")
	streams    = flag.Int("catchup.streams", 4, "streams the backlog is spread over (written concurrently, so WAL runs interleave)")
	entryBytes = flag.Int("catchup.entry", 16<<10, "entry payload bytes")
	perAppend  = flag.Int("catchup.append", 64, "entries per append (entry x append = the WAL run size)")
	readBytes  = flag.Int("catchup.readbytes", 16<<20, "ReadOptions.MaxBytes of each read (a Kafka partition_max_bytes)")
	passes     = flag.Int("catchup.passes", 3, "read passes per layout, each by a fresh core (the median is the result)")
	readAhead  = flag.Int64("catchup.readahead", 0, "LifecycleConfig.GenerationReadAheadBytes of the reading core (<= 0: off, the default)")
	abAhead    = flag.Bool("catchup.ab-readahead", false, "alternate read passes without and with generation read-ahead (an interleaved A/B on the same data; reports both medians)")
	layouts    = flag.String("catchup.layouts", "generations,wal", "layouts to run: generations, wal or both")
	recycle    = flag.Bool("catchup.recycle", true, "ReadOptions.Recycle: generation spans in recycled buffers, released after each read (as the Kafka fetch path does)")
	abRecycle  = flag.Bool("catchup.ab-recycle", false, "alternate read passes without and with ReadOptions.Recycle (an interleaved A/B on the same data; reports both medians)")
	cpuProfile = flag.String("catchup.cpuprofile", "", "write a CPU profile of the read passes only (not the writes or the materialization) to this file")
	parallel   = flag.Bool("catchup.parallel", false, "read the streams concurrently, one goroutine each (as a Kafka fetch reading its partitions concurrently), instead of in turn")
	cold       = flag.Bool("catchup.cold", false, "also measure with the page cache dropped (sync; echo 3 > /proc/sys/vm/drop_caches, needs root): before each cold file read and each cold read pass; every pass is then run cold, then warm, and a RESULT line is printed for each")
)

func TestMain(m *testing.M) { os.Exit(s3test.Main(m)) }

func mb(n int64) float64 { return float64(n) / 1e6 }

// cpuSeconds is the process's user+system CPU time.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

func loadAvg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	if len(b) > 14 {
		b = b[:14]
	}
	return string(b)
}

func TestCatchUpCore(t *testing.T) {
	if !*runFlag {
		t.Skip("benchmark: run with -catchup.run") // skip-ok: opt-in benchmark, not a test
	}
	t.Logf("backlog %.0f MB, %d streams, %d B entries x %d per append (%d KiB runs), reads of %d KiB, objects=%s; load %s",
		mb(*backlog), *streams, *entryBytes, *perAppend, *entryBytes**perAppend>>10, *readBytes>>10, *objectsArg, loadAvg())
	// One directory for the plain file and every layout's data: one file
	// system, so the file read is the same disk's sequential read.
	root, err := os.MkdirTemp("", "nereus-catchupbench-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(root) })
	sf := newSeqFile(t, root)
	modes := []string{"warm"}
	if *cold {
		modes = []string{"cold", "warm"}
	}
	files, files1M := map[string][]float64{}, map[string][]float64{}
	res := map[string]map[string]float64{"cold": {}, "warm": {}}
	for _, l := range []string{"generations", "wal"} {
		if !contains(*layouts, l) {
			continue
		}
		lr := runLayout(t, l, sf, root)
		for _, m := range modes {
			res[m][l] = lr.median[m]
			files[m] = append(files[m], lr.file[m]...)
			files1M[m] = append(files1M[m], lr.file1M[m]...)
		}
	}
	for _, m := range modes {
		file, file1M := median(files[m]), median(files1M[m])
		g, w := res[m]["generations"], res[m]["wal"]
		t.Logf("RESULT %s objects=%s: file %.0f MB/s (io.Copy, median of the reads before each pass; read(2) of 1 MiB %.0f MB/s), generations %.0f MB/s, WAL %.0f MB/s, generations/WAL %.2fx, generations/file %.0f%% (of the 1 MiB read(2) loop %.0f%%); load %s",
			m, *objectsArg, file, file1M, g, w, g/w, 100*g/file, 100*g/file1M, loadAvg())
	}
}

func contains(list, s string) bool {
	for _, x := range splitComma(list) {
		if x == s {
			return true
		}
	}
	return false
}

func splitComma(s string) []string {
	var out []string
	start := 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == ',' {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return out
}

// seqFile is a plain file of the backlog's size in the benchmark's
// directory (the stores' file system), read with io.Copy and with a 1 MiB
// read(2) loop: the "local sequential file read" the target compares
// with. Page cache warm, as the stores' objects are after being written,
// or (-catchup.cold) dropped before each read.
type seqFile struct {
	path string
	dev  uint64 // st_dev of the file (its block device's stat is sampled around cold reads)
}

// newSeqFile writes the file (removed with root) as fsstore writes its
// objects, so it is laid out on the disk alike: data written in 16 MiB
// chunks (the size of a full generation object), each chunk fdatasync'ed
// before the next is written.
func newSeqFile(t *testing.T, root string) *seqFile {
	p := filepath.Join(root, "seq")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	const chunk = 16 << 20
	buf := make([]byte, chunk)
	rand.New(rand.NewSource(1)).Read(buf)
	for n := int64(0); n < *backlog; n += int64(len(buf)) {
		if _, err := f.Write(buf[:min(int64(len(buf)), *backlog-n)]); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Fdatasync(int(f.Fd())); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return &seqFile{path: p, dev: device(t, p)}
}

// read reads the file twice and returns the MB/s of each: with io.Copy to
// io.Discard (the figure of sessions 9-11: io.Discard's ReadFrom takes
// over, so it is read(2) of 8 KiB into a reused buffer, whatever buffer
// io.CopyBuffer is given), then with read(2) of 1 MiB into one reused
// buffer (fewer syscalls: about half the CPU per GB here, the stronger
// baseline). With cold, the page cache is dropped before each of the two.
func (sf *seqFile) read(t *testing.T, cold bool) (ioCopy, read1M float64) {
	mode := "warm"
	if cold {
		mode = "cold"
		dropCaches(t)
	}
	f, err := os.Open(sf.path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	io0 := deviceReadBytes()
	bs0, _ := readBlockStat(sf.dev)
	st, c0 := time.Now(), cpuSeconds()
	n, err := io.CopyBuffer(io.Discard, f, make([]byte, 1<<20))
	if err != nil {
		t.Fatal(err)
	}
	d, cpu := time.Since(st).Seconds(), cpuSeconds()-c0
	dev := deviceReadBytes() - io0
	bs1, _ := readBlockStat(sf.dev)
	if cold {
		dropCaches(t)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1<<20)
	io0 = deviceReadBytes()
	bs2, _ := readBlockStat(sf.dev)
	st, c0 = time.Now(), cpuSeconds()
	var n2 int64
	for {
		k, err := f.Read(buf)
		n2 += int64(k)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	d2, cpu2 := time.Since(st).Seconds(), cpuSeconds()-c0
	dev2 := deviceReadBytes() - io0
	bs3, _ := readBlockStat(sf.dev)
	shape, shape2 := "", ""
	if cold {
		shape, shape2 = "; "+ioShape(bs0, bs1, d), "; "+ioShape(bs2, bs3, d2)
	}
	t.Logf("file %s: io.Copy (8 KiB reads) of %.0f MB: %.0f MB/s (%.3f CPU-s/GB, %.0f MB from the device%s); read(2) of 1 MiB: %.0f MB/s (%.3f CPU-s/GB, %.0f MB from the device%s); load %s",
		mode, mb(n), mb(n)/d, cpu/(float64(n)/1e9), mb(dev), shape, mb(n2)/d2, cpu2/(float64(n2)/1e9), mb(dev2), shape2, loadAvg())
	return mb(n) / d, mb(n2) / d2
}

type env struct {
	objects objectstore.ObjectStore
	meta    *boltstore.Store
	dir     string
	close   func()
}

func openEnv(t *testing.T, root string) *env {
	dir, err := os.MkdirTemp(root, "data-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) }) // also when a store is missing (a skip)
	e := &env{dir: dir}
	var closers []func()
	switch *objectsArg {
	case "fs":
		fs, err := fsstore.Open(filepath.Join(dir, "objects"))
		if err != nil {
			t.Fatal(err)
		}
		e.objects = fs
		closers = append(closers, func() { _ = fs.Close() })
	case "s3":
		st := s3test.Require(t).NewStore(t)
		e.objects = st
		closers = append(closers, func() { deleteAll(t, st) })
	default:
		t.Fatalf("-catchup.objects=%q: want fs or s3", *objectsArg)
	}
	e.meta, err = boltstore.Open(filepath.Join(dir, "meta.db"), boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e.close = func() {
		_ = e.meta.Close()
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
		_ = os.RemoveAll(dir)
	}
	return e
}

// deleteAll empties an S3 bucket (versitygw keeps it on the shared disk
// until the server stops).
func deleteAll(t *testing.T, st objectstore.ObjectStore) {
	ctx := context.Background()
	var keys []string
	for info, err := range st.List(ctx, "") {
		if err != nil {
			t.Logf("list for cleanup: %v", err)
			break
		}
		keys = append(keys, info.Key)
	}
	for _, k := range keys {
		_ = st.Delete(ctx, k, nil)
	}
}

func (e *env) core(t *testing.T, materialize bool, readAheadBytes int64) *stream.Core {
	return e.coreOn(t, e.objects, materialize, readAheadBytes)
}

// coreOn is core over objects (e.objects or a wrapper of it).
func (e *env) coreOn(t *testing.T, objects objectstore.ObjectStore, materialize bool, readAheadBytes int64) *stream.Core {
	ctx := context.Background()
	w, err := objectwal.Open(ctx, objectwal.Config{Store: objects, Prefix: "wal/bench"})
	if err != nil {
		t.Fatal(err)
	}
	// GC off: the WAL segments materialized ranges no longer need would be
	// deleted during the read passes otherwise, and the deletes' kernel
	// work would be measured with the reads.
	lc := stream.LifecycleConfig{GenerationMaxAge: time.Second, MaterializeConcurrency: 2, GCDisabled: true}
	if !materialize {
		lc = stream.LifecycleConfig{DisableMaterialization: true, GCDisabled: true}
	}
	lc.GenerationReadAheadBytes = readAheadBytes
	c, err := stream.Open(ctx, stream.Config{Metadata: e.meta, ObjectWAL: w, ObjectStore: objects, WriterID: "bench",
		Lifecycle: lc, RetentionInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// layoutResult is one layout's figures by cache mode ("warm", and
// "cold" with -catchup.cold): the median MB/s of the read passes and the
// file reads taken before each (io.Copy, then read(2) of 1 MiB).
type layoutResult struct {
	median       map[string]float64
	file, file1M map[string][]float64
}

// runLayout writes the backlog, then reads it in passes, each preceded
// by a read of the plain file (so every pass has its own file figure from
// the same moment's load). With -catchup.cold a pass is: the file read
// cold (cache dropped before io.Copy and before the read(2) loop), then
// warm; the store read cold (cache dropped), then warm (a fresh core each).
func runLayout(t *testing.T, layout string, sf *seqFile, root string) layoutResult {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	e := openEnv(t, root)
	defer e.close()
	if *objectsArg == "fs" {
		if dd, df := device(t, filepath.Join(e.dir, "objects")), device(t, sf.path); dd != df {
			t.Fatalf("the plain file (device %#x) is not on the fsstore data dir's file system (device %#x)", df, dd)
		}
	}
	gen := layout == "generations"
	c := e.core(t, gen, -1)
	ids := write(t, ctx, c)
	if gen {
		st := time.Now()
		for {
			done := true
			for _, id := range ids {
				in, err := c.Describe(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				if in.MaterializedThrough < in.EndOffset {
					done = false
				}
			}
			if done {
				break
			}
			if ctx.Err() != nil {
				t.Fatal("not materialized in time")
			}
			time.Sleep(200 * time.Millisecond)
		}
		t.Logf("%s: materialized in %v", layout, time.Since(st).Round(100*time.Millisecond))
	}
	_ = c.Close()
	modes := []string{"warm"}
	if *cold {
		modes = []string{"cold", "warm"}
	}
	lr := layoutResult{median: map[string]float64{}, file: map[string][]float64{}, file1M: map[string][]float64{}}
	off, on := map[string][]float64{}, map[string][]float64{}
	for pass := range max(*passes, 1) {
		ra, name := *readAhead, ""
		if *abAhead {
			ra, name = -1, " (read-ahead off)"
			if pass%2 == 1 {
				ra, name = 64<<20, " (read-ahead 64 MiB)"
			}
		}
		rec := *recycle
		if *abRecycle {
			rec, name = pass%2 == 1, " (recycle off)"
			if rec {
				name = " (recycle on)"
			}
		}
		fileMBs, file1M := map[string]float64{}, map[string]float64{}
		for _, m := range modes {
			fileMBs[m], file1M[m] = sf.read(t, m == "cold")
			lr.file[m], lr.file1M[m] = append(lr.file[m], fileMBs[m]), append(lr.file1M[m], file1M[m])
		}
		for _, m := range modes {
			if m == "cold" {
				dropCaches(t)
			}
			// A fresh core: no tail cache, no cached footers or runs; its
			// reads of the object store are counted.
			cs := &countingStore{ObjectStore: e.objects}
			c = e.coreOn(t, cs, false, ra)
			var ms0, ms1 runtime.MemStats
			stopProfile := startProfile(t, layout+"-"+m)
			runtime.ReadMemStats(&ms0)
			io0 := deviceReadBytes()
			bs0, _ := readBlockStat(sf.dev)
			got, d, cpu := read(t, ctx, c, ids, rec)
			dev := deviceReadBytes() - io0
			bs1, _ := readBlockStat(sf.dev)
			shape := ""
			if m == "cold" {
				shape = "; " + ioShape(bs0, bs1, d.Seconds())
			}
			runtime.ReadMemStats(&ms1)
			stopProfile()
			extra := name + fmt.Sprintf(" [%.0f MB allocated, %d mallocs, %d GCs]", mb(int64(ms1.TotalAlloc-ms0.TotalAlloc)), ms1.Mallocs-ms0.Mallocs, ms1.NumGC-ms0.NumGC)
			mbs := mb(got) / d.Seconds()
			st := c.Stats()
			_ = c.Close()
			t.Logf("%s pass %d %s%s: read %.0f MB in %v: %.0f MB/s = %.0f%% of the %s file read before it (%.0f%% of its 1 MiB read(2) loop) (%.3f CPU-s/GB, %.0f MB per CPU-s; %.0f MB from the device%s; fetched %.0f MB from the object store in %d ranged reads = %.2f bytes per payload byte; %d generation reads, %d WAL reads, %d read-aheads, %d used, %d not started: cached); load %s",
				layout, pass+1, m, extra, mb(got), d.Round(time.Millisecond), mbs, 100*mbs/fileMBs[m], m, 100*mbs/file1M[m], cpu/(float64(got)/1e9), mb(got)/cpu,
				mb(dev), shape, mb(cs.bytes.Load()), cs.reads.Load(), float64(cs.bytes.Load())/float64(got),
				st.GenerationReads, st.WALReads, st.GenerationReadAheads, st.GenerationReadAheadHits, st.GenerationReadAheadsCached, loadAvg())
			if (*abAhead || *abRecycle) && pass%2 == 1 {
				on[m] = append(on[m], mbs)
			} else {
				off[m] = append(off[m], mbs)
			}
		}
	}
	for _, m := range modes {
		if *abAhead && len(on[m]) > 0 {
			t.Logf("%s %s: median without read-ahead %.0f MB/s, with %.0f MB/s", layout, m, median(off[m]), median(on[m]))
		}
		if *abRecycle && len(on[m]) > 0 {
			t.Logf("%s %s: median without recycling %.0f MB/s, with %.0f MB/s", layout, m, median(off[m]), median(on[m]))
		}
		lr.median[m] = median(off[m])
	}
	return lr
}

// startProfile starts a CPU profile of one read pass (-catchup.cpuprofile)
// into <path>.<layout>.<n>, the first n not taken (runtime/pprof takes
// one profile at a time, so writes and materialization stay out of it);
// the returned func stops it.
func startProfile(t *testing.T, layout string) func() {
	if *cpuProfile == "" {
		return func() {}
	}
	var f *os.File
	for n := 0; f == nil; n++ {
		p := fmt.Sprintf("%s.%s.%d", *cpuProfile, layout, n)
		if _, err := os.Stat(p); err == nil {
			continue
		}
		var err error
		if f, err = os.Create(p); err != nil {
			t.Fatal(err)
		}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		t.Fatal(err)
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
	}
}

func median(v []float64) float64 {
	sort.Float64s(v)
	return v[len(v)/2]
}

// write appends the backlog to *streams streams concurrently, each with a
// window of appends in flight, so their WAL runs interleave in segments.
func write(t *testing.T, ctx context.Context, c *stream.Core) []stream.ID {
	ids := make([]stream.ID, *streams)
	sessions := make([]stream.Session, *streams)
	for i := range ids {
		in, err := c.Create(ctx, "catchup-"+strconv.Itoa(i), stream.CreateOptions{Profile: stream.ObjectWALAsyncObject})
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = in.ID
		if sessions[i], err = c.AcquireSession(ctx, in.ID, stream.SessionOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	payload := make([]byte, *entryBytes)
	rand.New(rand.NewSource(2)).Read(payload)
	appendBytes := int64(*entryBytes * *perAppend)
	var sent atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, *streams)
	st := time.Now()
	for i := range ids {
		wg.Add(1)
		go func(s stream.Session) {
			defer wg.Done()
			var inflight []*stream.AppendFuture
			for {
				if sent.Add(appendBytes) > *backlog {
					break
				}
				entries := make([]stream.Entry, *perAppend)
				for k := range entries {
					entries[k] = stream.Entry{Payload: payload, RecordCount: 1, Timestamp: time.Now().UnixMilli()}
				}
				inflight = append(inflight, c.AppendAsync(s, stream.AppendRequest{Entries: entries, ExpectedStart: -1}))
				if len(inflight) >= 4 {
					if _, err := inflight[0].Wait(ctx); err != nil {
						errs <- err
						return
					}
					inflight = inflight[1:]
				}
			}
			for _, f := range inflight {
				if _, err := f.Wait(ctx); err != nil {
					errs <- err
					return
				}
			}
		}(sessions[i])
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	t.Logf("wrote %.0f MB in %v", mb(min(sent.Load(), *backlog)), time.Since(st).Round(100*time.Millisecond))
	return ids
}

// read reads every stream from offset 0 to its end, one read of
// *readBytes per stream per round (as a Kafka fetch of all partitions
// does): streams in turn, or with -catchup.parallel each stream by its own
// goroutine. It returns the payload bytes, wall time and CPU time. With
// rec, each result is released once its bytes are counted.
func read(t *testing.T, ctx context.Context, c *stream.Core, ids []stream.ID, rec bool) (int64, time.Duration, float64) {
	next := make([]int64, len(ids))
	ends := make([]int64, len(ids))
	for i, id := range ids {
		in, err := c.Describe(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		next[i], ends[i] = in.StartOffset, in.EndOffset
	}
	one := func(i int) (int64, error) {
		res, err := c.Read(ctx, ids[i], next[i], stream.ReadOptions{MaxBytes: *readBytes, MaxEntries: 10000, Recycle: rec})
		if err != nil {
			return 0, fmt.Errorf("read %v at %d: %w", ids[i], next[i], err)
		}
		var n int64
		for _, e := range res.Entries {
			n += int64(len(e.Payload))
		}
		next[i] = res.Next
		res.Release()
		return n, nil
	}
	var got atomic.Int64
	st, c0 := time.Now(), cpuSeconds()
	if *parallel {
		var wg sync.WaitGroup
		errs := make(chan error, len(ids))
		for i := range ids {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for next[i] < ends[i] {
					n, err := one(i)
					if err != nil {
						errs <- err
						return
					}
					got.Add(n)
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		return got.Load(), time.Since(st), cpuSeconds() - c0
	}
	for {
		active := false
		for i := range ids {
			if next[i] >= ends[i] {
				continue
			}
			active = true
			n, err := one(i)
			if err != nil {
				t.Fatal(err)
			}
			got.Add(n)
		}
		if !active {
			break
		}
	}
	return got.Load(), time.Since(st), cpuSeconds() - c0
}

// countingStore counts the bytes a read pass fetches from the object store
// (ranged reads and whole-object GETs, footers included): with the payload
// bytes served, it says how many bytes were copied and verified per byte
// served, which load does not distort. It keeps objectstore.RangeReader
// (reads into recycled buffers) as the store has it.
type countingStore struct {
	objectstore.ObjectStore
	bytes, reads atomic.Int64
}

func (s *countingStore) count(n int) {
	s.bytes.Add(int64(n))
	s.reads.Add(1)
}

func (s *countingStore) Get(ctx context.Context, key string) ([]byte, objectstore.UpdateVersion, error) {
	b, v, err := s.ObjectStore.Get(ctx, key)
	s.count(len(b))
	return b, v, err
}

func (s *countingStore) GetRange(ctx context.Context, key string, offset, length int64) ([]byte, error) {
	b, err := s.ObjectStore.GetRange(ctx, key, offset, length)
	s.count(len(b))
	return b, err
}

func (s *countingStore) ReadRange(ctx context.Context, key string, offset int64, dst []byte, opts objectstore.ReadRangeOptions) (int, error) {
	n, err := objectstore.ReadRange(ctx, s.ObjectStore, key, offset, dst, opts)
	s.count(n)
	return n, err
}

// Cached keeps objectstore.CacheProber (the read-ahead asks it whether a
// span is in the page cache) as the store has it; not counted (no data).
func (s *countingStore) Cached(ctx context.Context, key string, offset, length int64) (bool, error) {
	return objectstore.Cached(ctx, s.ObjectStore, key, offset, length)
}

// ReadRangePieces keeps objectstore.PieceReader (a span read and checked
// piece by piece) as the store has it; counted as one ranged read.
func (s *countingStore) ReadRangePieces(ctx context.Context, key string, offset int64, dst []byte, piece int, opts objectstore.ReadRangeOptions, filled func(n int) error) (int, error) {
	n, err := objectstore.ReadRangePieces(ctx, s.ObjectStore, key, offset, dst, piece, opts, filled)
	s.count(n)
	return n, err
}
