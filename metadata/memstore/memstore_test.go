package memstore_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nereusstream/nereus-go/metadata"
	"github.com/nereusstream/nereus-go/metadata/memstore"
	"github.com/nereusstream/nereus-go/metadata/metadatatest"
)

func TestConformance(t *testing.T) {
	metadatatest.Run(t, func(t *testing.T) metadata.Store { return memstore.New() })
}

func TestExpireSessionDeletesEphemerals(t *testing.T) {
	ctx := context.Background()
	s := memstore.New()
	defer s.Close()
	sess, err := s.NewSession(ctx, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutEphemeral(ctx, "e", nil, metadata.NotExists, sess.ID()); err != nil {
		t.Fatal(err)
	}
	s.ExpireSession(sess.ID())
	select {
	case <-sess.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("Done not closed")
	}
	if _, err := s.Get(ctx, "e"); !errors.Is(err, metadata.ErrKeyNotFound) {
		t.Fatalf("ephemeral survived expiry: %v", err)
	}
	if s.StopKeepAlive(sess.ID()) {
		t.Fatal("StopKeepAlive on an expired session reported alive")
	}
}

// TestSessionLivesOutItsTTL: a session whose keep-alive stopped keeps its
// ephemerals for its whole TTL and loses them right after. A one-minute TTL
// passes instantly in a synctest bubble.
func TestSessionLivesOutItsTTL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		s := memstore.New()
		defer s.Close()
		sess, err := s.NewSession(ctx, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.PutEphemeral(ctx, "e", nil, metadata.NotExists, sess.ID()); err != nil {
			t.Fatal(err)
		}
		if !s.StopKeepAlive(sess.ID()) {
			t.Fatal("live session reported dead")
		}
		time.Sleep(time.Minute - time.Millisecond)
		synctest.Wait()
		if _, err := s.Get(ctx, "e"); err != nil {
			t.Fatalf("ephemeral gone before the TTL passed: %v", err)
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		select {
		case <-sess.Done():
		default:
			t.Fatal("session alive after its TTL")
		}
		if _, err := s.Get(ctx, "e"); !errors.Is(err, metadata.ErrKeyNotFound) {
			t.Fatalf("ephemeral survived its session: %v", err)
		}
	})
}
