package opstest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/nereusstream/nereus-go/internal/testenv"
)

// chromiumPath finds Debian's chromium (scripts/test.sh installs it), or
// NEREUS_CHROMIUM.
func chromiumPath(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("NEREUS_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	testenv.SkipOrFail(t, "headless Chromium not installed: apt-get install chromium (scripts/test.sh does) or set NEREUS_CHROMIUM")
	return ""
}

// artifactDir is where the console screenshots go: NEREUS_ARTIFACTS_DIR,
// or <module>/.cache/test-artifacts (git-ignored), under console/.
func artifactDir(t *testing.T) string {
	t.Helper()
	base := os.Getenv("NEREUS_ARTIFACTS_DIR")
	if base == "" {
		_, file, _, _ := goruntime.Caller(0)
		base = filepath.Join(filepath.Dir(file), "..", "..", ".cache", "test-artifacts")
	}
	dir := filepath.Join(base, "console")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

type health struct {
	NodeID string `json:"nodeId"`
}

// TestConsolePages loads every console page in one headless Chromium
// against the seeded server, waits for the content each must show (the
// pages refresh every 2 s), fails on any uncaught script error, and saves
// a full-page screenshot of each as a test artifact.
func TestConsolePages(t *testing.T) {
	bin := chromiumPath(t)
	resp, err := http.Get(srv.URL() + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	var h health
	err = json.NewDecoder(resp.Body).Decode(&h)
	resp.Body.Close()
	if err != nil || h.NodeID == "" {
		t.Fatalf("healthz: %v %+v", err, h)
	}

	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(bin), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck, chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1300, 900),
		// This machine's network is closed: no background connections.
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		// Chromium puts its process-singleton socket in $TMPDIR
		// (org.chromium.Chromium.XXXXXX) and removes it only on a clean
		// shutdown, which a test's kill of the browser is not.
		chromedp.Env("TMPDIR=" + t.TempDir()),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancelT := context.WithTimeout(ctx, 3*time.Minute)
	defer cancelT()

	var mu sync.Mutex
	var scriptErrs []string
	if err := chromedp.Listen(ctx, func(ev any) {
		if e, ok := ev.(*runtime.EventExceptionThrown); ok {
			mu.Lock()
			d := e.ExceptionDetails
			msg := fmt.Sprintf("%s at %s:%d:%d", d.Text, d.URL, d.LineNumber+1, d.ColumnNumber+1)
			if d.Exception != nil && d.Exception.Description != "" {
				msg += ": " + d.Exception.Description
			}
			scriptErrs = append(scriptErrs, msg)
			mu.Unlock()
		}
	}); err != nil {
		t.Fatalf("starting %s: %v", bin, err)
	}
	dir := artifactDir(t)

	pages := []struct {
		name, hash string
		want       []string
	}{
		{"overview", "#/", []string{"Overview", h.NodeID, "kafka serving", "pulsar serving", "Live throughput", "Stream commits",
			"Brokers (1)", "(this node)", "held streams", "active"}},
		{"streams", "#/streams", []string{restStream, "kafka/payments/0", "OBJECT_WAL_ASYNC_OBJECT", "time 1h", "in generations below"}},
		{"stream", "#/stream/" + strings.ReplaceAll(restStream, "/", "%2F"), []string{"Stream " + restStream,
			"head (committed end)", fmt.Sprint(restEntries), "order-4", "time 1h, bytes unlimited", "size (retained bytes)", "generations"}},
		{"kafka", "#/kafka", []string{kafkaTopic, kafkaGroup, "kafka/" + kafkaTopic + "/2"}},
		{"pulsar", "#/pulsar", []string{pulsarTopic, pulsarSub}},
		{"wal", "#/wal", []string{"Object WAL", "segments uploaded", "Object store calls", "put", "Generations and GC", "passes / errors", "Recent deletions"}},
	}
	if withBK {
		pages[1].want = append(pages[1].want, bkStream, "BOOKKEEPER_WAL_ONLY")
		pages[5].want = append(pages[5].want, "entries added", "ledgers created")
	}
	// Values a page must show in a given table cell: (page, JS expression
	// returning the text, want).
	// The group's lag as a Kafka client computes it (ListOffsets minus
	// OffsetFetch over the partitions with a committed offset), to compare
	// with the console's.
	lag := kafkaLag(t)
	checks := map[string][]struct{ expr, want string }{
		"kafka":   {{cellJS("Consumer groups", kafkaGroup, 2), fmt.Sprint(lag)}},
		"pulsar":  {{cellJS("Subscriptions", pulsarSub, 4), fmt.Sprint(pulsarSent - pulsarAcked)}},
		"streams": {{cellJS("Streams", restStream, 4), fmt.Sprint(restEntries)}},
		// The live chart has at least two samples: it shows a rate.
		"overview": {{`(document.querySelector("#c-commit .now") || {textContent: ""}).textContent.endsWith("/s") ? "rate" : "none"`, "rate"},
			// This node holds the append sessions of the seeded streams.
			{`Number(` + cellJS("Brokers", "active", 6) + `) > 0 ? "holds streams" : "holds none"`, "holds streams"}},
	}

	for _, p := range pages {
		url := srv.URL() + "/console/" + p.hash
		if err := chromedp.Do(ctx, chromedp.Navigate(url)); err != nil {
			t.Fatalf("%s: navigate %s: %v", p.name, url, err)
		}
		var text string
		var err error
		deadline := time.Now().Add(45 * time.Second)
		missing := p.want
		for {
			if text, err = chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerText`)); err != nil {
				t.Fatalf("%s: reading the page: %v", p.name, err)
			}
			missing = missing[:0:0]
			for _, w := range p.want {
				if !strings.Contains(text, w) {
					missing = append(missing, w)
				}
			}
			for _, c := range checks[p.name] {
				got, err := chromedp.Run(ctx, chromedp.Evaluate[string](c.expr))
				if err != nil || got != c.want {
					missing = append(missing, fmt.Sprintf("cell %q (got %q)", c.want, got))
				}
			}
			if len(missing) == 0 || time.Now().After(deadline) {
				break
			}
			time.Sleep(500 * time.Millisecond)
		}
		if png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100) /* 100: PNG */); err != nil {
			t.Errorf("%s: screenshot: %v", p.name, err)
		} else {
			path := filepath.Join(dir, p.name+".png")
			if err := os.WriteFile(path, png, 0o644); err != nil {
				t.Error(err)
			}
			t.Logf("%s: screenshot %s (%d bytes)", p.name, path, len(png))
		}
		if len(missing) > 0 {
			t.Errorf("console page %s (%s) lacks %q; it shows:\n%s", p.name, url, missing, text)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(scriptErrs) > 0 {
		t.Errorf("uncaught script errors: %s", strings.Join(scriptErrs, "; "))
	}
}

// cellJS returns a JS expression giving the text of column col of the row
// that has a cell reading key, in the first table after the heading that
// starts with heading ("" if absent).
func cellJS(heading, key string, col int) string {
	return fmt.Sprintf(`(() => {
  const h = [...document.querySelectorAll("h1, h2")].find((e) => e.textContent.startsWith(%q));
  if (!h) return "";
  let t = h.nextElementSibling;
  while (t && t.tagName !== "TABLE") t = t.nextElementSibling;
  if (!t) return "";
  const row = [...t.querySelectorAll("tbody tr")].find((r) => [...r.cells].some((c) => c.textContent.trim() === %q));
  return row && row.cells[%d] ? row.cells[%d].textContent.trim() : "";
})()`, heading, key, col, col)
}

func kafkaLag(t *testing.T) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(srv.KafkaAddr()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	committed, err := adm.FetchOffsets(ctx, kafkaGroup)
	if err != nil {
		t.Fatalf("OffsetFetch: %v", err)
	}
	ends, err := adm.ListEndOffsets(ctx, kafkaTopic)
	if err != nil {
		t.Fatalf("ListOffsets: %v", err)
	}
	var lag int64
	n := 0
	committed.Each(func(o kadm.OffsetResponse) {
		if e, ok := ends.Lookup(o.Topic, o.Partition); ok && o.Err == nil {
			lag += e.Offset - o.At
			n++
		}
	})
	if n == 0 {
		t.Fatalf("group %s has no committed offsets on %s", kafkaGroup, kafkaTopic)
	}
	return lag
}
