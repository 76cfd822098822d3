package integration

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/nereusstream/nereus-go/bookkeeper"
)

// TestZKDigestAuth: with ZKOptions.Digest the session is digest
// authenticated: it reads a znode only that digest user may read, which an
// unauthenticated session may not.
func TestZKDigestAuth(t *testing.T) {
	env.Require(t)
	s, err := bookkeeper.DialZK(ctxFor(t, 30*time.Second), env.ZK, bookkeeper.ZKOptions{LedgersRoot: env.Root, Logger: quiet(),
		Digest: "nereus:zk-digest-pw"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	path := fmt.Sprintf("/nereus-digest-test-%d", time.Now().UnixNano())
	if _, err := s.Conn().Create(path, []byte("secret"), 0, zk.DigestACL(zk.PermAll, "nereus", "zk-digest-pw")); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Conn().Delete(path, -1) }()
	if b, _, err := s.Conn().Get(path); err != nil || string(b) != "secret" {
		t.Fatalf("authenticated read: %q %v", b, err)
	}
	anon, err := bookkeeper.DialZK(ctxFor(t, 30*time.Second), env.ZK, bookkeeper.ZKOptions{LedgersRoot: env.Root, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer anon.Close()
	if _, _, err := anon.Conn().Get(path); !errors.Is(err, zk.ErrNoAuth) {
		t.Fatalf("unauthenticated read: %v, want ErrNoAuth", err)
	}
}
