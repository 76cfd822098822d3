package s3store_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/internal/testenv/s3test"
	"github.com/nereusstream/nereus-go/objectstore"
	"github.com/nereusstream/nereus-go/objectstore/s3store"
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func TestVersitygwMissingBucket(t *testing.T) {
	srv := s3test.Require(t)
	ctx := ctxT(t)
	cfg := srv.Config("no-such-bucket-here")
	if _, err := s3store.New(ctx, cfg); !errors.Is(err, s3store.ErrNoSuchBucket) || errors.Is(err, objectstore.ErrNotFound) {
		t.Fatalf("New on a missing bucket: %v, want ErrNoSuchBucket", err)
	}
	cfg.SkipBucketCheck = true
	st, err := s3store.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	check := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, s3store.ErrNoSuchBucket) || errors.Is(err, objectstore.ErrNotFound) {
			t.Fatalf("%s: %v, want ErrNoSuchBucket and not ErrNotFound", what, err)
		}
	}
	_, _, err = st.Get(ctx, "k")
	check("Get", err)
	_, err = st.Head(ctx, "k")
	check("Head", err)
	_, err = st.GetRange(ctx, "k", 0, 10)
	check("GetRange", err)
	_, err = st.Put(ctx, "k", []byte("x"), objectstore.PutOptions{Mode: objectstore.PutCreate})
	check("Put", err)
	for _, err := range st.List(ctx, "") {
		check("List", err)
	}
}

func TestVersitygwPrefixIsolation(t *testing.T) {
	srv := s3test.Require(t)
	ctx := ctxT(t)
	bucket := srv.NewBucket(t)
	stores := map[string]*s3store.Store{}
	for _, p := range []string{"tenant-a/", "tenant-b/"} {
		cfg := srv.Config(bucket)
		cfg.Prefix = p
		st, err := s3store.New(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		stores[p] = st
		if _, err := st.Put(ctx, "shared/key", []byte(p), objectstore.PutOptions{Mode: objectstore.PutCreate}); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
	}
	for p, st := range stores {
		got, _, err := st.Get(ctx, "shared/key")
		if err != nil || string(got) != p {
			t.Fatalf("%s: Get = %q, %v", p, got, err)
		}
		var keys []string
		for info, err := range st.List(ctx, "") {
			if err != nil {
				t.Fatal(err)
			}
			keys = append(keys, info.Key)
		}
		if len(keys) != 1 || keys[0] != "shared/key" {
			t.Fatalf("%s: List = %q", p, keys)
		}
	}
	if err := (s3store.Config{Bucket: "b", Prefix: "no-slash"}).Validate(); err == nil {
		t.Fatalf("prefix without trailing slash accepted")
	}
}

// Flip a byte in the object's file inside versitygw's posix root: a full
// read must fail with ErrCorrupt (the CRC32C stored at upload no longer
// matches), never return the bad bytes.
func TestVersitygwCorruptObjectDetected(t *testing.T) {
	srv := s3test.Require(t)
	ctx := ctxT(t)
	bucket := srv.NewBucket(t)
	st, err := s3store.New(ctx, srv.Config(bucket))
	if err != nil {
		t.Fatal(err)
	}
	data := []byte("the quick brown fox jumps over the lazy dog")
	if _, err := st.Put(ctx, "seg/obj", data, objectstore.PutOptions{Mode: objectstore.PutCreate}); err != nil {
		t.Fatal(err)
	}
	if got, _, err := st.Get(ctx, "seg/obj"); err != nil || string(got) != string(data) {
		t.Fatalf("Get before corruption: %q, %v", got, err)
	}
	path := filepath.Join(srv.Root, bucket, "seg", "obj")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("posix object file: %v", err)
	}
	b[4] ^= 0x01
	// Rewrite in place (keeps the xattrs holding the stored checksum).
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(b, 0); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	_, _, err = st.Get(ctx, "seg/obj")
	if !errors.Is(err, objectstore.ErrCorrupt) {
		t.Fatalf("Get of corrupted object: %v, want ErrCorrupt", err)
	}
}
