package pulsar

import "testing"

func TestAdvertisedFor(t *testing.T) {
	s := &Server{advertise: "0.0.0.0:6650"}
	if got := s.advertisedFor("127.0.0.1:6650"); got != "127.0.0.1:6650" {
		t.Fatalf("wildcard listener: %s", got)
	}
	s = &Server{advertise: "127.0.0.2:6650"}
	if got := s.advertisedFor("127.0.0.1:6650"); got != "127.0.0.2:6650" {
		t.Fatalf("bound listener: %s", got)
	}
	s = &Server{advertise: "[::]:6650", cfg: Config{AdvertisedAddr: "broker.example:6650"}}
	if got := s.advertisedFor("127.0.0.1:6650"); got != "broker.example:6650" {
		t.Fatalf("configured: %s", got)
	}
}
