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
	// Five calls take microseconds: one line, or two if they straddle a
	// second boundary; never one per call.
	if n := strings.Count(out, "segment vanished under the reader"); n < 1 || n > 2 {
		t.Fatalf("logged %d times for 5 errors, want 1 (2 across a second boundary):\n%s", n, out)
	}
}
