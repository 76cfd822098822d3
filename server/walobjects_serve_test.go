package server_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/adminapi"
	"github.com/nereusstream/nereus-go/internal/testenv/restload"
	"github.com/nereusstream/nereus-go/internal/testserver"
	"github.com/nereusstream/nereus-go/objectstore/fsstore"
	"github.com/nereusstream/nereus-go/objectstore/walstore"
)

// TestServeWALObjectStoreSwitchKeepsEverything: on its defaults `nereus
// serve` keeps the Object WAL's objects in <data-dir>/walstore and loses no
// acknowledged append over SIGKILL restarts; started on the same data dir
// with --wal-object-store files it moves every one of them back into
// <data-dir>/objects (the log store is left empty), and back again on the
// defaults — no acknowledged append is lost across either switch.
func TestServeWALObjectStoreSwitchKeepsEverything(t *testing.T) {
	dir := t.TempDir()
	opts := testserver.Options{DataDir: dir, DisableKafka: true, DisablePulsar: true}
	srv := testserver.Start(t, opts)
	c := srv.Client()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	_, err := c.CreateStream(ctx, adminapi.CreateStreamRequest{Name: "walswitch"})
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	load := restload.New(c, "walswitch")
	restload.KillCycles(t, srv, load, 2, 50, 7)
	srv.Stop()
	if logs, _ := filepath.Glob(filepath.Join(dir, "walstore", "*.log")); len(logs) == 0 {
		t.Fatalf("no log file in %s/walstore on the defaults", dir)
	}
	if objects := walObjectCount(t, dir); objects == 0 {
		t.Fatal("the log store holds no Object WAL object after appends on the defaults")
	}

	files := opts
	files.Args = []string{"--wal-object-store", "files"}
	srv = testserver.Start(t, files)
	load.Retarget(srv.Client())
	load.Verify(t)
	restload.KillCycles(t, srv, load, 1, 50, 8)
	srv.Stop()
	expectLogLine(t, srv, "moved the Object WAL's objects from the log store into files")
	if n := walObjectCount(t, dir); n != 0 {
		t.Fatalf("the log store still holds %d objects after a start with --wal-object-store files", n)
	}
	if n := fileWALObjectCount(t, dir); n == 0 {
		t.Fatalf("no Object WAL object in %s/objects with --wal-object-store files", dir)
	}

	srv = testserver.Start(t, opts)
	load.Retarget(srv.Client())
	load.Verify(t)
	restload.KillCycles(t, srv, load, 1, 50, 9)
	srv.Stop()
	expectLogLine(t, srv, "moved the Object WAL's objects from files into the log store")
	if n := fileWALObjectCount(t, dir); n != 0 {
		t.Fatalf("%s/objects still holds %d Object WAL objects on the defaults", dir, n)
	}
}

// fileWALObjectCount counts the Object WAL objects in the data dir's
// filesystem object store.
func fileWALObjectCount(t *testing.T, dir string) int {
	t.Helper()
	s, err := fsstore.Open(filepath.Join(dir, "objects"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	n := 0
	for _, err := range s.List(context.Background(), "wal/") {
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	return n
}

// walObjectCount opens the data dir's log store (the server is stopped)
// and counts its objects.
func walObjectCount(t *testing.T, dir string) int {
	t.Helper()
	s, err := walstore.Open(filepath.Join(dir, "walstore"), walstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	n := 0
	for _, err := range s.List(context.Background(), "") {
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	return n
}

func expectLogLine(t *testing.T, srv *testserver.Server, line string) {
	t.Helper()
	log, err := os.ReadFile(srv.LogPath())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(log), line) {
		t.Fatalf("the server log does not say %q", line)
	}
}
