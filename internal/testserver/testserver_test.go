package testserver

import (
	"context"
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/adminapi"
)

func TestLifecycle(t *testing.T) {
	s := Start(t, Options{})
	h := s.Health()
	if h.Status != "ok" || h.NodeID == "" || h.Listeners["http"] != s.HTTPAddr() {
		t.Fatalf("health %+v", h)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := s.Client().CreateStream(ctx, adminapi.CreateStreamRequest{Name: "x"}); err != nil {
		t.Fatal(err)
	}
	addr, pid := s.HTTPAddr(), s.Pid()

	s.Stop()
	if s.Running() {
		t.Fatal("running after Stop")
	}
	s.Restart()
	if s.HTTPAddr() != addr || s.Pid() == pid {
		t.Fatalf("restart: addr %s (was %s), pid %d (was %d)", s.HTTPAddr(), addr, s.Pid(), pid)
	}
	if h2 := s.Health(); h2.NodeID != h.NodeID {
		t.Fatalf("node id changed across restart: %s -> %s", h.NodeID, h2.NodeID)
	}

	s.Kill()
	if s.Running() {
		t.Fatal("running after Kill")
	}
	s.Restart()
	if !s.Running() || s.HTTPAddr() != addr {
		t.Fatalf("not serving on %s after kill+restart", addr)
	}
	// What survives depends on the storage backend's durability.
	_, err := s.Client().DescribeStream(ctx, "x")
	if h.Durable && err != nil {
		t.Fatalf("durable backend lost stream x across SIGKILL: %v", err)
	}
	if !h.Durable && !adminapi.HasCode(err, adminapi.CodeStreamNotFound) {
		t.Fatalf("non-durable backend: describe after restart = %v", err)
	}
}
