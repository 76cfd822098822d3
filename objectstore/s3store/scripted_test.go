package s3store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/objectstore"
)

// scripted is a loopback HTTP server whose every S3 answer is decided by the
// test, to drive the retry and classification paths real servers rarely
// produce (409, 503, lost responses, bad checksums). It records requests.
type scripted struct {
	mu     sync.Mutex
	log    []string // "METHOD /bucket/key"
	handle func(n int, r *http.Request, w http.ResponseWriter)
	srv    *httptest.Server
}

func newScripted(t *testing.T, handle func(n int, r *http.Request, w http.ResponseWriter)) (*scripted, *Store) {
	t.Helper()
	sc := &scripted{handle: handle}
	sc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		sc.mu.Lock()
		sc.log = append(sc.log, r.Method+" "+r.URL.Path)
		n := len(sc.log) - 1
		sc.mu.Unlock()
		sc.handle(n, r, w)
	}))
	t.Cleanup(sc.srv.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := New(ctx, Config{
		Bucket: "bkt", Endpoint: sc.srv.URL, UsePathStyle: true,
		AccessKeyID: "a", SecretAccessKey: "s",
		MaxConflictRetries: 3, MaxSlowDownRetries: 3,
		InitialBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond,
		SkipBucketCheck: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	return sc, st
}

func (sc *scripted) requests() []string {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	return append([]string(nil), sc.log...)
}

func s3Error(w http.ResponseWriter, status int, code string) {
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	_, _ = fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>%s</Message><RequestId>r</RequestId></Error>`, code, code)
}

func okPut(w http.ResponseWriter, etag string) {
	w.Header().Set("ETag", `"`+etag+`"`)
	w.WriteHeader(http.StatusOK)
}

func okHead(w http.ResponseWriter, etag string, size int) {
	w.Header().Set("ETag", `"`+etag+`"`)
	w.Header().Set("Content-Length", fmt.Sprint(size))
	w.Header().Set("Last-Modified", time.Now().UTC().Format(http.TimeFormat))
	w.WriteHeader(http.StatusOK)
}

var ctxBg = context.Background()

func update(etag string) objectstore.PutOptions {
	return objectstore.PutOptions{Mode: objectstore.PutUpdate, Version: objectstore.UpdateVersion{ETag: etag}}
}

func TestConflictRereadThenRetrySucceeds(t *testing.T) {
	sc, st := newScripted(t, func(n int, r *http.Request, w http.ResponseWriter) {
		switch {
		case r.Method == http.MethodPut && n == 0:
			if got := r.Header.Get("If-Match"); got != `"v1"` {
				t.Errorf("If-Match = %q", got)
			}
			s3Error(w, 409, "ConditionalRequestConflict")
		case r.Method == http.MethodHead:
			okHead(w, "v1", 3) // still at v1: the CAS may still win
		case r.Method == http.MethodPut:
			okPut(w, "v2")
		}
	})
	v, err := st.Put(ctxBg, "head", []byte("new"), update("v1"))
	if err != nil || v.ETag != "v2" {
		t.Fatalf("Put = %v, %v", v, err)
	}
	if got := sc.requests(); strings.Join(got, ",") != "PUT /bkt/head,HEAD /bkt/head,PUT /bkt/head" {
		t.Fatalf("requests %q", got)
	}
}

func TestConflictRereadShowsLoss(t *testing.T) {
	sc, st := newScripted(t, func(n int, r *http.Request, w http.ResponseWriter) {
		switch r.Method {
		case http.MethodPut:
			s3Error(w, 409, "ConditionalRequestConflict")
		case http.MethodHead:
			okHead(w, "v9", 3) // someone else moved it: no point retrying
		}
	})
	_, err := st.Put(ctxBg, "head", []byte("new"), update("v1"))
	if !errors.Is(err, objectstore.ErrPreconditionFailed) {
		t.Fatalf("Put = %v, want ErrPreconditionFailed", err)
	}
	if n := len(sc.requests()); n != 2 {
		t.Fatalf("%d requests, want PUT+HEAD", n)
	}
	// Create-mode: the re-read finds the key exists.
	_, err = st.Put(ctxBg, "head", []byte("new"), objectstore.PutOptions{Mode: objectstore.PutCreate})
	if !errors.Is(err, objectstore.ErrAlreadyExists) {
		t.Fatalf("PutCreate = %v, want ErrAlreadyExists", err)
	}
}

func TestConflictBoundedThenErrConflict(t *testing.T) {
	sc, st := newScripted(t, func(n int, r *http.Request, w http.ResponseWriter) {
		switch r.Method {
		case http.MethodPut:
			if r.Header.Get("If-None-Match") != "*" {
				t.Errorf("If-None-Match = %q", r.Header.Get("If-None-Match"))
			}
			s3Error(w, 409, "ConditionalRequestConflict")
		case http.MethodHead:
			if r.URL.Path == "/bkt" {
				w.WriteHeader(http.StatusOK) // the bucket exists
				return
			}
			w.WriteHeader(http.StatusNotFound) // key still absent
		}
	})
	_, err := st.Put(ctxBg, "k", []byte("x"), objectstore.PutOptions{Mode: objectstore.PutCreate})
	if !errors.Is(err, objectstore.ErrConflict) || objectstore.Classify(err) != objectstore.NotApplied {
		t.Fatalf("Put = %v (%v), want ErrConflict / not-applied", err, objectstore.Classify(err))
	}
	puts := 0
	for _, r := range sc.requests() {
		if strings.HasPrefix(r, "PUT") {
			puts++
		}
	}
	if puts != 1+3 { // first attempt + MaxConflictRetries
		t.Fatalf("%d PUTs, want 4", puts)
	}
}

func TestSlowDownBackoffAndRetry(t *testing.T) {
	sc, st := newScripted(t, func(n int, r *http.Request, w http.ResponseWriter) {
		if n < 2 {
			s3Error(w, 503, "SlowDown")
			return
		}
		okPut(w, "v1")
	})
	v, err := st.Put(ctxBg, "k", []byte("x"), objectstore.PutOptions{Mode: objectstore.PutCreate})
	if err != nil || v.ETag != "v1" {
		t.Fatalf("Put = %v, %v", v, err)
	}
	if n := len(sc.requests()); n != 3 {
		t.Fatalf("%d requests, want 3", n)
	}

	// Throttled forever: bounded, and the error carries no sentinel.
	sc2, st2 := newScripted(t, func(n int, r *http.Request, w http.ResponseWriter) { s3Error(w, 503, "SlowDown") })
	_, err = st2.Put(ctxBg, "k", []byte("x"), objectstore.PutOptions{})
	if err == nil || objectstore.Classify(err) != objectstore.Unknown {
		t.Fatalf("Put = %v (%v)", err, objectstore.Classify(err))
	}
	if n := len(sc2.requests()); n != 1+3 {
		t.Fatalf("%d requests, want 4", n)
	}
}

// A conditional PUT whose response is lost (connection dropped after the
// server read the request) must come back as unknown, and must not have
// been retried by the SDK: a retry could turn our own win into a 412.
func TestLostResponseIsUnknownAndNotRetried(t *testing.T) {
	sc, st := newScripted(t, func(n int, r *http.Request, w http.ResponseWriter) {
		hj, ok := w.(http.Hijacker)
		if !ok {
			t.Error("no hijacker")
			return
		}
		conn, _, err := hj.Hijack()
		if err == nil {
			_ = conn.Close()
		}
	})
	for _, opts := range []objectstore.PutOptions{{Mode: objectstore.PutCreate}, update("v1"), {}} {
		before := len(sc.requests())
		_, err := st.Put(ctxBg, "k", []byte("x"), opts)
		if err == nil || objectstore.Classify(err) != objectstore.Unknown {
			t.Fatalf("mode %d: Put = %v (%v), want unknown", opts.Mode, err, objectstore.Classify(err))
		}
		if n := len(sc.requests()) - before; n != 1 {
			t.Fatalf("mode %d: %d attempts, want exactly 1 (no blind retry)", opts.Mode, n)
		}
	}
	err := st.Delete(ctxBg, "k", &objectstore.UpdateVersion{ETag: "v1"})
	if err == nil || objectstore.Classify(err) != objectstore.Unknown {
		t.Fatalf("Delete = %v (%v), want unknown", err, objectstore.Classify(err))
	}
}

func TestIfMatchOnMissingKeyIsPreconditionFailed(t *testing.T) {
	_, st := newScripted(t, func(n int, r *http.Request, w http.ResponseWriter) { s3Error(w, 404, "NoSuchKey") })
	_, err := st.Put(ctxBg, "k", []byte("x"), update("v1"))
	if !errors.Is(err, objectstore.ErrPreconditionFailed) {
		t.Fatalf("Put = %v", err)
	}
}

func TestNoSuchBucketIsNotNotFound(t *testing.T) {
	_, st := newScripted(t, func(n int, r *http.Request, w http.ResponseWriter) {
		if r.Method == http.MethodHead {
			w.WriteHeader(http.StatusNotFound) // HEAD: no body, for key and bucket alike
			return
		}
		s3Error(w, 404, "NoSuchBucket")
	})
	check := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, ErrNoSuchBucket) || errors.Is(err, objectstore.ErrNotFound) {
			t.Fatalf("%s = %v, want ErrNoSuchBucket and not ErrNotFound", what, err)
		}
	}
	_, _, err := st.Get(ctxBg, "k")
	check("Get", err)
	_, err = st.Head(ctxBg, "k")
	check("Head", err)
	_, err = st.Put(ctxBg, "k", []byte("x"), objectstore.PutOptions{Mode: objectstore.PutCreate})
	check("Put", err)
	err = st.Delete(ctxBg, "k", nil)
	check("Delete", err)
	for _, err := range st.List(ctxBg, "") {
		check("List", err)
	}
}

func TestPreconditionFailedMapping(t *testing.T) {
	_, st := newScripted(t, func(n int, r *http.Request, w http.ResponseWriter) { s3Error(w, 412, "PreconditionFailed") })
	_, err := st.Put(ctxBg, "k", []byte("x"), objectstore.PutOptions{Mode: objectstore.PutCreate})
	if !errors.Is(err, objectstore.ErrAlreadyExists) {
		t.Fatalf("PutCreate = %v, want ErrAlreadyExists", err)
	}
	_, err = st.Put(ctxBg, "k", []byte("x"), update("v1"))
	if !errors.Is(err, objectstore.ErrPreconditionFailed) {
		t.Fatalf("PutUpdate = %v, want ErrPreconditionFailed", err)
	}
}

func TestResponseChecksumMismatchIsCorrupt(t *testing.T) {
	_, st := newScripted(t, func(n int, r *http.Request, w http.ResponseWriter) {
		w.Header().Set("ETag", `"v1"`)
		w.Header().Set("x-amz-checksum-crc32c", "AAAAAA==") // not the CRC32C of the body
		w.Header().Set("Content-Length", "5")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte("hello"))
	})
	_, _, err := st.Get(ctxBg, "k")
	if !errors.Is(err, objectstore.ErrCorrupt) {
		t.Fatalf("Get = %v, want ErrCorrupt", err)
	}
}
