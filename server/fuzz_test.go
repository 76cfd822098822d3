package server

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/nereusstream/nereus-go/adminapi"
	"github.com/nereusstream/nereus-go/cluster"
	"github.com/nereusstream/nereus-go/metadata/memstore"
	"github.com/nereusstream/nereus-go/stream"
	"github.com/nereusstream/nereus-go/stream/streammem"
)

// FuzzAppendBody feeds arbitrary bytes to POST /v1/streams/{name}/entries.
// Invariants: the handler never panics; it answers 200 or a 4xx with an
// error body (never 5xx: bad input is the client's error); a 200 carries
// one offset per requested entry, consecutive by record count, and the
// stream's end advanced by exactly End-Start.
func FuzzAppendBody(f *testing.F) {
	for _, seed := range []string{
		`{"entries":[{"text":"a"}]}`,
		`{"entries":[{"payload":"AAEC","recordCount":3,"timestamp":5},{"text":""}]}`,
		`{"entries":[{"text":"a"}],"expectedStart":0}`,
		`{"entries":[{"text":"a","payload":"AA=="}]}`,
		`{"entries":[]}`,
		`{"entries":[{"recordCount":4294967295}]}`,
		`{"entries":[{"payload":"!!"}]}`,
		`{"entries":null,"x":1}`,
		`[]`, `{`, ``, `null`, `{"entries":[{"text":"\ud800"}]}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		mem := streammem.New()
		meta := memstore.New()
		defer meta.Close()
		node, err := cluster.Join(t.Context(), cluster.Config{Metadata: meta, Storage: mem, NodeID: "fuzz", KafkaBrokerID: 1,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		defer node.Close()
		a := &api{storage: mem, nodeID: "fuzz", logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			metrics: newMetrics(newRegistry()), drain: make(chan struct{}), cluster: node}
		mux := http.NewServeMux()
		a.routes(mux)
		if _, err := mem.Create(t.Context(), "f", stream.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest("POST", "/v1/streams/f/entries", strings.NewReader(string(body))))
		info, err := mem.Lookup(t.Context(), "f")
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case rec.Code == 200:
			var resp adminapi.AppendResponse
			var req adminapi.AppendRequest
			if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil {
				t.Fatalf("200 with a bad body %q: %v", rec.Body.String(), err)
			}
			if err := json.Unmarshal(body, &req); err != nil {
				t.Fatalf("200 for a body that does not decode: %v", err)
			}
			if len(resp.Offsets) != len(req.Entries) || info.EndOffset != resp.End || resp.Start != 0 {
				t.Fatalf("request %s: response %+v, stream end %d", body, resp, info.EndOffset)
			}
			next := resp.Start
			for i, off := range resp.Offsets {
				if off != next {
					t.Fatalf("offset %d of entry %d, want %d", off, i, next)
				}
				rc := int64(req.Entries[i].RecordCount)
				if rc == 0 {
					rc = 1
				}
				next += rc
			}
			if next != resp.End {
				t.Fatalf("offsets end at %d, response says %d", next, resp.End)
			}
		case rec.Code >= 400 && rec.Code < 500:
			var eb adminapi.ErrorBody
			if err := json.Unmarshal(rec.Body.Bytes(), &eb); err != nil || eb.Error == "" || eb.Code.Status() != rec.Code {
				t.Fatalf("HTTP %d with error body %q", rec.Code, rec.Body.String())
			}
			if info.EndOffset != 0 {
				t.Fatalf("rejected append (HTTP %d) changed the stream end to %d", rec.Code, info.EndOffset)
			}
		default:
			t.Fatalf("HTTP %d for body %q: %s", rec.Code, body, rec.Body.String())
		}
	})
}
