package walstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/objectstore"
	"github.com/nereusstream/nereus-go/objectstore/walstore"
)

type modelObject struct {
	data    []byte
	version objectstore.UpdateVersion
}

// TestAgainstModel runs random Puts (every mode, some DeferSync), Deletes
// (some conditional), reads, listings and reopens against a map, with
// files small enough that sealing, file deletion and copy-forward run all
// the time: the store answers exactly as the map says, keeps versions
// across reopens, and issues every version once.
func TestAgainstModel(t *testing.T) {
	var copies, deleted int64
	for seed := range uint64(8) {
		t.Run(strconv.FormatUint(seed, 10), func(t *testing.T) {
			c, d := runModel(t, seed, 1500)
			copies += c
			deleted += d
		})
	}
	if copies == 0 || deleted == 0 {
		t.Fatalf("the runs copied %d objects forward and deleted %d files: the space paths were never exercised", copies, deleted)
	}
	t.Logf("%d objects copied forward, %d files deleted", copies, deleted)
}

func runModel(t *testing.T, seed uint64, steps int) (copies, filesDeleted int64) {
	ctx := context.Background()
	dir := t.TempDir()
	opts := walstore.Options{FileBytes: 48 << 10, PreallocBytes: 16 << 10, CopyAfter: time.Nanosecond}
	rng := rand.New(rand.NewPCG(seed, 99))
	s, err := walstore.Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	model := map[string]modelObject{}
	issued := map[string]bool{}
	keys := make([]string, 24)
	for i := range keys {
		keys[i] = fmt.Sprintf("wal/n/%02d", i)
	}
	issue := func(v objectstore.UpdateVersion) {
		if issued[v.ETag] {
			t.Fatalf("seed %d: version %s issued twice", seed, v.ETag)
		}
		issued[v.ETag] = true
	}
	for step := range steps {
		key := keys[rng.IntN(len(keys))]
		cur, exists := model[key]
		switch op := rng.IntN(100); {
		case op < 40:
			data := bytes.Repeat([]byte{byte(step)}, rng.IntN(40<<10))
			o := objectstore.PutOptions{DeferSync: rng.IntN(3) == 0}
			switch rng.IntN(3) {
			case 1:
				o.Mode = objectstore.PutCreate
			case 2:
				o.Mode, o.Version = objectstore.PutUpdate, cur.version
				if !exists || rng.IntN(4) == 0 {
					o.Version = objectstore.UpdateVersion{ETag: "stale"}
				}
			}
			v, err := s.Put(ctx, key, data, o)
			switch {
			case o.Mode == objectstore.PutCreate && exists:
				expect(t, seed, step, "PutCreate of an existing key", err, objectstore.ErrAlreadyExists)
			case o.Mode == objectstore.PutUpdate && (!exists || !o.Version.Equal(cur.version)):
				expect(t, seed, step, "PutUpdate with a stale version", err, objectstore.ErrPreconditionFailed)
			case err != nil:
				t.Fatalf("seed %d step %d: Put %s: %v", seed, step, key, err)
			default:
				issue(v)
				model[key] = modelObject{data: data, version: v}
			}
		case op < 55:
			var ifv *objectstore.UpdateVersion
			stale := false
			if rng.IntN(2) == 0 {
				v := cur.version
				if rng.IntN(4) == 0 {
					v, stale = objectstore.UpdateVersion{ETag: "stale"}, true
				}
				ifv = &v
			}
			err := s.Delete(ctx, key, ifv)
			switch {
			case !exists:
				expect(t, seed, step, "Delete of a missing key", err, objectstore.ErrNotFound)
			case stale:
				expect(t, seed, step, "Delete with a stale version", err, objectstore.ErrPreconditionFailed)
			case err != nil:
				t.Fatalf("seed %d step %d: Delete %s: %v", seed, step, key, err)
			default:
				delete(model, key)
			}
		case op < 85:
			checkKey(t, s, seed, step, key, model)
			if exists && len(cur.data) > 0 {
				off := rng.Int64N(int64(len(cur.data)))
				n := rng.Int64N(int64(len(cur.data)) + 10)
				got, err := s.GetRange(ctx, key, off, n)
				if err != nil || !bytes.Equal(got, cur.data[off:min(off+n, int64(len(cur.data)))]) {
					t.Fatalf("seed %d step %d: GetRange(%s, %d, %d) = %d bytes, %v", seed, step, key, off, n, len(got), err)
				}
			}
		case op < 97:
			checkList(t, s, seed, step, model)
		default:
			st := s.Stats()
			copies, filesDeleted = copies+st.Copies, filesDeleted+st.FilesDeleted
			if err := s.Close(); err != nil {
				t.Fatalf("seed %d step %d: Close: %v", seed, step, err)
			}
			if s, err = walstore.Open(dir, opts); err != nil {
				t.Fatalf("seed %d step %d: reopen: %v", seed, step, err)
			}
			checkList(t, s, seed, step, model)
			for _, k := range keys {
				checkKey(t, s, seed, step, k, model)
			}
		}
	}
	st := s.Stats()
	return copies + st.Copies, filesDeleted + st.FilesDeleted
}

func expect(t *testing.T, seed uint64, step int, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("seed %d step %d: %s: %v, want %v", seed, step, what, err, want)
	}
}

func checkKey(t *testing.T, s *walstore.Store, seed uint64, step int, key string, model map[string]modelObject) {
	t.Helper()
	data, v, err := s.Get(context.Background(), key)
	m, ok := model[key]
	switch {
	case !ok:
		expect(t, seed, step, "Get of a deleted key", err, objectstore.ErrNotFound)
	case err != nil:
		t.Fatalf("seed %d step %d: Get %s: %v", seed, step, key, err)
	case !bytes.Equal(data, m.data) || !v.Equal(m.version):
		t.Fatalf("seed %d step %d: Get %s = %d bytes at %s, want %d bytes at %s", seed, step, key, len(data), v.ETag, len(m.data), m.version.ETag)
	}
}

func checkList(t *testing.T, s *walstore.Store, seed uint64, step int, model map[string]modelObject) {
	t.Helper()
	n := 0
	prev := ""
	for info, err := range s.List(context.Background(), "wal/") {
		if err != nil {
			t.Fatalf("seed %d step %d: List: %v", seed, step, err)
		}
		m, ok := model[info.Key]
		if !ok || info.Size != int64(len(m.data)) || !info.Version.Equal(m.version) || info.Key <= prev {
			t.Fatalf("seed %d step %d: List yields %+v (model has %v, previous key %q)", seed, step, info, ok, prev)
		}
		prev = info.Key
		n++
	}
	if n != len(model) {
		t.Fatalf("seed %d step %d: List yields %d objects, the model holds %d", seed, step, n, len(model))
	}
}
