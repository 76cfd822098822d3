package walstore_test

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nereusstream/nereus-go/internal/testenv"
	"github.com/nereusstream/nereus-go/objectstore"
	"github.com/nereusstream/nereus-go/objectstore/walstore"
)

// TestFullDiskIsNotSticky: on a file system that fills up, Puts fail
// with the write's error while every acknowledged object still reads
// back; once there is room again the same store takes writes, and a
// reopen finds every acknowledged object intact (the partial records the
// failed writes left were cut off).
func TestFullDiskIsNotSticky(t *testing.T) {
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", mnt).CombinedOutput(); err != nil {
		testenv.SkipOrFail(t, "cannot mount a size-limited tmpfs (needs root or CAP_SYS_ADMIN): %v: %s", err, strings.TrimSpace(string(out)))
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", mnt).Run() })
	dir := filepath.Join(mnt, "store")
	opts := walstore.Options{FileBytes: 1 << 20, PreallocBytes: 256 << 10}
	s, err := walstore.Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	acked := map[string]objectstore.UpdateVersion{}
	payload := func(k string) []byte { return bytes.Repeat([]byte(k), (100<<10)/len(k)) }
	put := func(k string) error {
		v, err := s.Put(ctx, k, payload(k), objectstore.PutOptions{})
		if err == nil {
			acked[k] = v
		}
		return err
	}
	var full error
	for i := range 100 {
		if full = put(fmt.Sprintf("a/%03d", i)); full != nil {
			break
		}
	}
	if full == nil || !strings.Contains(full.Error(), "no space left") {
		t.Fatalf("a 3 MiB file system never filled: %v", full)
	}
	for k, v := range acked {
		if data, got, err := s.Get(ctx, k); err != nil || !got.Equal(v) || !bytes.Equal(data, payload(k)) {
			t.Fatalf("acknowledged %s on the full disk: %v", k, err)
		}
	}
	if out, err := exec.Command("mount", "-o", "remount,size=64m", mnt).CombinedOutput(); err != nil {
		t.Fatalf("growing the tmpfs: %v: %s", err, out)
	}
	for i := range 20 {
		if err := put(fmt.Sprintf("b/%03d", i)); err != nil {
			t.Fatalf("Put %d after the disk was grown: %v", i, err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = walstore.Open(dir, opts); err != nil {
		t.Fatalf("reopen after the full disk: %v", err)
	}
	defer func() { _ = s.Close() }()
	for k, v := range acked {
		if data, got, err := s.Get(ctx, k); err != nil || !got.Equal(v) || !bytes.Equal(data, payload(k)) {
			t.Fatalf("acknowledged %s after the reopen: %v", k, err)
		}
	}
	t.Logf("full after %d objects (%v); %d acknowledged objects intact after growing the disk and reopening", len(acked)-20, full, len(acked))
}
