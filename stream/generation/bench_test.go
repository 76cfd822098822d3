package generation

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/objectstore"
	"github.com/nereusstream/nereus-go/objectstore/fsstore"
	"github.com/nereusstream/nereus-go/objectstore/memstore"
)

// Benchmarks (figures in docs/notes/issue-9-genformat.md):
//
//	go test -run '^$' -bench . -benchtime 3x ./stream/generation/
//
// NEREUS_GENBENCH_BYTES sets the catch-up backlog (default 1 GiB); the
// backlog and the plain file live in one temp dir per process, removed at
// exit. Both are read from the page cache after being written, so the
// comparison is read path against read path, not disk against disk.

const (
	benchObjectBytes = 16 << 20
	benchEntryBytes  = 16 << 10
	benchReadBytes   = 1 << 20
)

// cpuTime is the process's user+system CPU time so far. The machine is
// shared: wall-clock MB/s depends on what else runs, so the read
// benchmarks also report MB per CPU-second ("cpu-MB/s"), which does not.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func reportCPU(b *testing.B, start time.Duration, bytes int64) {
	reportCPUTime(b, cpuTime()-start, bytes)
}

// reportCPUTime reports b.N × bytes over cpu as MB per CPU-second.
func reportCPUTime(b *testing.B, cpu time.Duration, bytes int64) {
	if cpu > 0 {
		b.ReportMetric(float64(bytes)*float64(b.N)/1e6/cpu.Seconds(), "cpu-MB/s")
	}
}

func benchBacklogBytes() int64 {
	if v, err := strconv.ParseInt(os.Getenv("NEREUS_GENBENCH_BYTES"), 10, 64); err == nil && v > 0 {
		return v
	}
	return 1 << 30
}

var bench struct {
	once    sync.Once
	dir     string
	err     error
	store   *fsstore.Store
	objs    []storedObject // entries not kept
	payload int64
	file    string
}

func TestMain(m *testing.M) {
	code := m.Run()
	if bench.store != nil {
		_ = bench.store.Close()
	}
	if bench.dir != "" {
		_ = os.RemoveAll(bench.dir)
	}
	os.Exit(code)
}

// benchEntries returns entries of benchEntryBytes from start, enough for
// one benchObjectBytes object, sharing one random payload.
func benchEntries(start int64, payload []byte) []Entry {
	n := benchObjectBytes / (benchEntryBytes + entryHeaderLen)
	es := make([]Entry, n)
	for i := range es {
		es[i] = Entry{Offset: start + int64(i)*10, RecordCount: 10, Timestamp: int64(i), Payload: payload}
	}
	return es
}

func benchPayload(n int) []byte {
	p := make([]byte, n)
	_, _ = rand.NewChaCha8([32]byte{1}).Read(p)
	return p
}

// setupBacklog writes the catch-up backlog of 16 MiB objects to an fsstore
// and a plain file of the same size, once per process.
func setupBacklog(b *testing.B) {
	bench.once.Do(func() {
		bench.dir, bench.err = os.MkdirTemp("", "genbench-")
		if bench.err != nil {
			return
		}
		bench.store, bench.err = fsstore.Open(filepath.Join(bench.dir, "store"))
		if bench.err != nil {
			return
		}
		payload := benchPayload(benchEntryBytes)
		bld := NewBuilder(1, 1, 0, BuilderOptions{Capacity: benchObjectBytes + 1<<20})
		start := int64(0)
		for g := 0; int64(g)*benchObjectBytes < benchBacklogBytes(); g++ {
			bld.Reset(1, uint64(g+1), start)
			for _, e := range benchEntries(start, payload) {
				if bench.err = bld.Add(e); bench.err != nil {
					return
				}
			}
			obj, info, err := bld.Finish()
			if err != nil {
				bench.err = err
				return
			}
			key := fmt.Sprintf("gen/1/%016x", g)
			if _, bench.err = bench.store.Put(context.Background(), key, obj, objectstore.PutOptions{Mode: objectstore.PutCreate}); bench.err != nil {
				return
			}
			bench.objs = append(bench.objs, storedObject{key: key, info: info})
			bench.payload += info.Bytes
			start = info.End
		}
		bench.file = filepath.Join(bench.dir, "plain")
		f, err := os.Create(bench.file)
		if err != nil {
			bench.err = err
			return
		}
		chunk := benchPayload(benchReadBytes)
		for n := int64(0); n < bench.payload; n += int64(len(chunk)) {
			if _, bench.err = f.Write(chunk); bench.err != nil {
				return
			}
		}
		if bench.err = f.Sync(); bench.err != nil { // clean pages can be dropped
			return
		}
		bench.err = f.Close()
	})
	if bench.err != nil {
		b.Fatal(bench.err)
	}
}

// BenchmarkBuild: encoding throughput (framing, CRCs, SHA-256) of 16 MiB
// objects, one reused buffer, per payload size.
func BenchmarkBuild(b *testing.B) {
	for _, size := range []int{1 << 10, 16 << 10, 256 << 10} {
		b.Run(fmt.Sprintf("entry=%dKiB", size>>10), func(b *testing.B) {
			payload := benchPayload(size)
			n := benchObjectBytes / (size + entryHeaderLen)
			bld := NewBuilder(1, 1, 0, BuilderOptions{Capacity: benchObjectBytes + 1<<20})
			b.SetBytes(int64(n * size))
			b.ReportAllocs()
			cpu0 := cpuTime()
			for b.Loop() {
				bld.Reset(1, 1, 0)
				for i := range n {
					if err := bld.Add(Entry{Offset: int64(i), RecordCount: 1, Payload: payload}); err != nil {
						b.Fatal(err)
					}
				}
				if _, _, err := bld.Finish(); err != nil {
					b.Fatal(err)
				}
			}
			reportCPU(b, cpu0, int64(n*size))
		})
	}
}

// BenchmarkDecodeSpan: this package's share of a read (block and entry
// CRCs, framing) on 1 MiB spans already in memory, with 16 KiB entries and
// with 1 KiB entries (where the per-entry work shows).
func BenchmarkDecodeSpan(b *testing.B) {
	for _, size := range []int{benchEntryBytes, 1 << 10} {
		b.Run(fmt.Sprintf("entry=%dKiB", size>>10), func(b *testing.B) { decodeSpanBench(b, size) })
	}
}

func decodeSpanBench(b *testing.B, entryBytes int) {
	payload := benchPayload(entryBytes)
	bld := NewBuilder(1, 1, 0, BuilderOptions{Capacity: benchObjectBytes + 1<<20})
	n := benchObjectBytes / (entryBytes + entryHeaderLen)
	for i := 0; i < n; i++ {
		if err := bld.Add(Entry{Offset: int64(i) * 10, RecordCount: 10, Timestamp: int64(i), Payload: payload}); err != nil {
			b.Fatal(err)
		}
	}
	obj, info, err := bld.Finish()
	if err != nil {
		b.Fatal(err)
	}
	f, err := ParseFooter(obj[info.FooterOffset:], info)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(info.Bytes)
	b.ReportAllocs()
	cpu0 := cpuTime()
	for b.Loop() {
		for from := info.Start; from < info.End; {
			off, n, err := f.Span(from, benchReadBytes)
			if err != nil {
				b.Fatal(err)
			}
			es, err := DecodeSpan(f, obj[off:off+n], off, from)
			if err != nil {
				b.Fatal(err)
			}
			from = es[len(es)-1].End()
		}
	}
	reportCPU(b, cpu0, info.Bytes)
}

// dropBacklogCache drops the page cache of every backlog file (the store's
// object files and the plain file).
func dropBacklogCache(b *testing.B) {
	err := filepath.WalkDir(bench.dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		return dropFileCache(path)
	})
	if err != nil {
		b.Skip("cannot drop the page cache:", err) // skip-ok: a benchmark variant (cold reads), only on platforms without posix_fadvise
	}
}

// BenchmarkCatchUp: Reader.Read sequential catch-up over the whole backlog
// with 1 MiB reads (a fresh Reader per pass, so footer GETs are included).
// "fsstore" reads the objects from the page cache, "fsstore-cold" drops
// their cached pages before each pass (the device is read), "memstore"
// isolates this package plus the allocation of each fetched span from any
// syscall; "-readahead" variants prefetch the next span (4 MiB budget).
// Compare with BenchmarkSequentialFile.
func BenchmarkCatchUp(b *testing.B) {
	setupBacklog(b)
	mem := memstoreOf(b)
	for _, c := range []struct {
		name      string
		store     objectstore.ObjectStore
		cold      bool
		readAhead int64
	}{
		{"fsstore", bench.store, false, 0},
		{"fsstore-readahead", bench.store, false, 4 << 20},
		{"fsstore-cold", bench.store, true, 0},
		{"fsstore-cold-readahead", bench.store, true, 4 << 20},
		{"memstore", mem, false, 0},
	} {
		b.Run(c.name, func(b *testing.B) { catchUpBench(b, c.store, c.cold, c.readAhead) })
	}
	// The same ranged GETs without this package: the store's share.
	b.Run("fsstore-getrange-only", func(b *testing.B) {
		type span struct {
			key    string
			off, n int64
		}
		var spans []span
		for _, o := range bench.objs {
			raw, err := bench.store.GetRange(context.Background(), o.key, o.info.FooterOffset, o.info.FooterLength)
			if err != nil {
				b.Fatal(err)
			}
			f, err := ParseFooter(raw, o.info)
			if err != nil {
				b.Fatal(err)
			}
			for from := o.info.Start; from < o.info.End; {
				off, n, _ := f.Span(from, benchReadBytes)
				spans = append(spans, span{o.key, off, n})
				for k := f.blockFor(from); k < f.NumBlocks() && f.Block(k).Pos < off+n; k++ {
					from = f.blockEnd(k)
				}
			}
		}
		b.SetBytes(bench.payload)
		var cpu time.Duration
		for b.Loop() {
			cpu0 := cpuTime()
			for _, sp := range spans {
				if _, err := bench.store.GetRange(context.Background(), sp.key, sp.off, sp.n); err != nil {
					b.Fatal(err)
				}
			}
			cpu += cpuTime() - cpu0
		}
		reportCPUTime(b, cpu, bench.payload)
		b.ReportMetric(float64(len(spans)), "reads/op")
	})
}

func catchUpBench(b *testing.B, store objectstore.ObjectStore, cold bool, readAhead int64) {
	b.SetBytes(bench.payload)
	b.ReportAllocs()
	ctx := context.Background()
	reads := 0
	var cpu time.Duration
	for b.Loop() {
		if cold {
			b.StopTimer()
			dropBacklogCache(b)
			b.StartTimer()
		}
		cpu0 := cpuTime()
		r := NewReader(store, 64<<20)
		r.SetReadAhead(readAhead)
		for _, o := range bench.objs {
			for from := o.info.Start; from < o.info.End; {
				es, err := r.Read(ctx, o.key, o.info, from, benchReadBytes)
				if err != nil {
					b.Fatal(err)
				}
				from = es[len(es)-1].End()
				reads++
			}
		}
		cpu += cpuTime() - cpu0
	}
	reportCPUTime(b, cpu, bench.payload)
	b.ReportMetric(float64(reads)/float64(b.N), "reads/op")
}

// memstoreOf copies the backlog into a memstore (once per call).
func memstoreOf(b *testing.B) objectstore.ObjectStore {
	mem := memstore.New()
	for _, o := range bench.objs {
		obj, _, err := bench.store.Get(context.Background(), o.key)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := mem.Put(context.Background(), o.key, obj, objectstore.PutOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	return mem
}

// BenchmarkSequentialFile: a plain sequential os.File read of a file the
// size of the backlog's payload, 1 MiB at a time into one buffer, from the
// page cache ("warm") and from the device ("cold").
func BenchmarkSequentialFile(b *testing.B) {
	setupBacklog(b)
	for _, cold := range []bool{false, true} {
		name := "warm"
		if cold {
			name = "cold"
		}
		b.Run(name, func(b *testing.B) { sequentialFileBench(b, cold) })
	}
}

func sequentialFileBench(b *testing.B, cold bool) {
	b.SetBytes(bench.payload)
	buf := make([]byte, benchReadBytes)
	var cpu time.Duration
	for b.Loop() {
		if cold {
			b.StopTimer()
			dropBacklogCache(b)
			b.StartTimer()
		}
		cpu0 := cpuTime()
		f, err := os.Open(bench.file)
		if err != nil {
			b.Fatal(err)
		}
		for {
			_, err := f.Read(buf)
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
		}
		_ = f.Close()
		cpu += cpuTime() - cpu0
	}
	reportCPUTime(b, cpu, bench.payload)
}
