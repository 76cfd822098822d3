package acklog

import (
	"context"
	"strings"
	"testing"
	"time"
)

func TestAckRejectsDoubleAcknowledgement(t *testing.T) {
	l := New()
	if err := l.Ack("p", Pos{Offset: 3}, Payload("w", 1)); err != nil {
		t.Fatal(err)
	}
	if err := l.Ack("p", Pos{Offset: 3}, Payload("w", 2)); err == nil || !strings.Contains(err.Error(), "position 3 acknowledged twice") {
		t.Fatalf("same position for two writes: %v", err)
	}
	if err := l.Ack("p", Pos{Offset: 4}, Payload("w", 1)); err == nil || !strings.Contains(err.Error(), "acknowledged twice") {
		t.Fatalf("one write at two positions: %v", err)
	}
	if err := l.Ack("q", Pos{Offset: 3}, Payload("w", 1)); err != nil {
		t.Fatalf("another partition: %v", err)
	}
	if err := l.Ack("p", Pos{Offset: 3, Index: 1}, Payload("w", 9)); err != nil {
		t.Fatalf("another batch index: %v", err)
	}
}

func TestVerify(t *testing.T) {
	l := New()
	for i, p := range []string{Payload("a", 0), Payload("b", 0), Payload("a", 1)} {
		if err := l.Ack("p", Pos{Offset: int64(i)}, p); err != nil {
			t.Fatal(err)
		}
	}
	e := func(off int64, p string) Entry { return Entry{Pos: Pos{Offset: off}, Payload: p} }
	good := []Entry{e(0, "a#0"), e(1, "b#0"), e(2, "a#1"), e(3, "c#0")} // c#0: unacknowledged, committed once
	if err := l.Verify("p", good); err != nil {
		t.Fatalf("good read-back: %v", err)
	}
	for name, tc := range map[string]struct {
		read []Entry
		want string
	}{
		"lost":           {[]Entry{e(0, "a#0"), e(2, "a#1")}, `acknowledged "b#0" at 1 is lost`},
		"moved":          {[]Entry{e(0, "a#0"), e(1, "x#0"), e(2, "a#1"), e(3, "b#0")}, `acknowledged "b#0" at 1 reads back at 3`},
		"duplicated":     {[]Entry{e(0, "a#0"), e(1, "b#0"), e(2, "a#1"), e(3, "a#1")}, `payload "a#1" read twice`},
		"reordered":      {[]Entry{e(0, "a#0"), e(1, "b#0"), e(2, "a#1"), e(3, "b#0x"), e(4, "a#0x"), e(5, "c#2"), e(6, "c#1")}, `writer "c": sequence 1 read after 2`},
		"not increasing": {[]Entry{e(0, "a#0"), e(1, "b#0"), e(2, "a#1"), e(2, "d#0")}, "position 2 read after 2"},
	} {
		err := l.Verify("p", tc.read)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want %q", name, err, tc.want)
		}
	}
}

func TestWaitKillPoint(t *testing.T) {
	l := New()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := l.WaitKillPoint(ctx, 0, 1, nil); err == nil || !strings.Contains(err.Error(), "0 of the required 1") {
		t.Fatalf("no progress: %v", err)
	}
	_ = l.Ack("p", Pos{}, "x")
	ctx2, cancel2 := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel2()
	if err := l.WaitKillPoint(ctx2, 0, 1, nil); err == nil {
		t.Fatal("nothing in flight, yet a kill point")
	}
	l.Begin()
	if err := l.WaitKillPoint(context.Background(), 0, 1, nil); err != nil {
		t.Fatal(err)
	}
	l.End()
}

func TestUnplacedAck(t *testing.T) {
	l := New()
	if err := l.AckUnplaced("p", "a#0"); err != nil {
		t.Fatal(err)
	}
	if err := l.Ack("p", Pos{Offset: 0}, "a#0"); err == nil {
		t.Fatal("a duplicate-acknowledged write acknowledged again at a position")
	}
	if err := l.Verify("p", []Entry{{Pos: Pos{Offset: 7}, Payload: "a#0"}}); err != nil {
		t.Fatal(err)
	}
	if err := l.Verify("p", nil); err == nil || !strings.Contains(err.Error(), `(as a duplicate) "a#0" is lost`) {
		t.Fatalf("lost unplaced ack: %v", err)
	}
}
