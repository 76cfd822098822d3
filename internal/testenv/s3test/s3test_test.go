package s3test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/nereusstream/nereus-go/objectstore"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

func TestFindBinaryHonoursEnv(t *testing.T) {
	t.Setenv(EnvBinary, "/nonexistent/versitygw")
	_, err := FindBinary()
	var nb *notInstalledError
	if !errors.As(err, &nb) {
		t.Fatalf("FindBinary with a bad %s: %v, want not-installed", EnvBinary, err)
	}
}

// Start and Stop a private server (not the shared one): it answers S3
// calls, and after Stop its process is gone and its root removed.
func TestStartStop(t *testing.T) {
	Require(t) // skip/fail policy for a missing binary
	bin, err := FindBinary()
	if err != nil {
		t.Fatal(err)
	}
	srv, err := Start(bin)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := srv.admin.ListBuckets(ctx, &s3.ListBucketsInput{}); err != nil {
		t.Fatalf("ListBuckets: %v", err)
	}
	b := srv.NewBucket(t)
	if _, err := os.Stat(srv.Root + "/" + b); err != nil {
		t.Fatalf("bucket directory: %v", err)
	}
	if err := srv.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	select {
	case <-srv.exited:
	default:
		t.Fatalf("process still running after Stop")
	}
	if _, err := os.Stat(srv.Root); !os.IsNotExist(err) {
		t.Fatalf("root not removed: %v", err)
	}
}

func TestSharedServerIsReused(t *testing.T) {
	a := Require(t)
	b := Require(t)
	if a != b {
		t.Fatalf("Require started two servers in one test binary")
	}
	st := a.NewStore(t)
	if st.Client() == nil {
		t.Fatal("no client")
	}
}

// Kill and Restart keep the address and the data: an object written before
// the outage reads back after it.
func TestKillRestartKeepsData(t *testing.T) {
	Require(t)
	bin, err := FindBinary()
	if err != nil {
		t.Fatal(err)
	}
	srv, err := Start(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	st := srv.NewStore(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := st.Put(ctx, "k", []byte("v"), objectstore.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	srv.Kill()
	kctx, kcancel := context.WithTimeout(ctx, 5*time.Second)
	_, _, err = st.Get(kctx, "k")
	kcancel()
	if err == nil {
		t.Fatal("a killed server answered")
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	got, _, err := st.Get(ctx, "k")
	if err != nil || string(got) != "v" {
		t.Fatalf("after restart: %q %v", got, err)
	}
}
