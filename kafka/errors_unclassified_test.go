package kafka

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// TestUnclassifiedErrorsAreLogged: the client only sees
// UNKNOWN_SERVER_ERROR, so the server log must say which error it was —
// once a second at most, however many requests meet it.
func TestUnclassifiedErrorsAreLogged(t *testing.T) {
	var buf bytes.Buffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, nil)))
	defer slog.SetDefault(prev)
	unclassifiedLogged.Store(0)

	for range 5 {
		if got := errorCode(errors.New("segment vanished under the reader")); got != kerr.UnknownServerError.Code {
			t.Fatalf("errorCode = %d, want UNKNOWN_SERVER_ERROR", got)
		}
	}
	out := buf.String()
	if n := strings.Count(out, "segment vanished under the reader"); n != 1 {
		t.Fatalf("logged %d times in one second, want 1:\n%s", n, out)
	}
}
