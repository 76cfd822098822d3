package server

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// The console's assets are embedded and served with a self-only CSP, and
// its JSON endpoints answer (the pages themselves are tested in headless
// Chromium by server/opstest).
func TestConsoleServesAssetsAndAPI(t *testing.T) {
	s, _ := startTest(t, testConfig(t))
	base := "http://" + s.HTTPAddr()
	get := func(path string) (*http.Response, string) {
		t.Helper()
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, string(b)
	}
	resp, body := get("/console/")
	if resp.StatusCode != 200 || !strings.Contains(body, `<script src="app.js">`) {
		t.Fatalf("/console/: %d %q", resp.StatusCode, body)
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") {
		t.Errorf("CSP %q", csp)
	}
	for _, asset := range []string{"/console/app.js", "/console/style.css"} {
		if resp, body := get(asset); resp.StatusCode != 200 || len(body) < 100 {
			t.Errorf("%s: %d, %d bytes", asset, resp.StatusCode, len(body))
		}
	}
	if resp, _ := get("/console"); resp.Request.URL.Path != "/console/" {
		t.Errorf("/console did not redirect to /console/ (ended at %s)", resp.Request.URL.Path)
	}
	resp, body = get("/console/api/metrics")
	var m struct {
		TimeMs   int64                      `json:"timeMs"`
		Families map[string]json.RawMessage `json:"families"`
	}
	if err := json.Unmarshal([]byte(body), &m); err != nil || resp.StatusCode != 200 || m.TimeMs == 0 {
		t.Fatalf("/console/api/metrics: %d %v", resp.StatusCode, err)
	}
	if _, ok := m.Families["nereus_stream_appends_committed_total"]; !ok {
		t.Errorf("/console/api/metrics lacks the core's families")
	}
	resp, body = get("/console/api/kafka")
	if resp.StatusCode != 200 || !strings.Contains(body, `"topics":[]`) {
		t.Errorf("/console/api/kafka on an empty server: %d %s", resp.StatusCode, body)
	}
}
