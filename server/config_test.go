package server

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

func parseFlags(t *testing.T, args ...string) *pflag.FlagSet {
	t.Helper()
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	RegisterFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return fs
}

func envOf(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestConfigDefaults(t *testing.T) {
	cfg, err := LoadConfig(parseFlags(t), envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	if cfg != DefaultConfig() {
		t.Fatalf("got %+v, want defaults %+v", cfg, DefaultConfig())
	}
	if cfg.DataDir != "./nereus-data" || cfg.HTTPAddr != "127.0.0.1:8080" || cfg.KafkaAddr != "127.0.0.1:9092" ||
		cfg.PulsarAddr != "127.0.0.1:6650" || cfg.BookKeeperZK != "" || cfg.BookKeeperRoot != "/ledgers" {
		t.Fatalf("unexpected embedded defaults: %+v", cfg)
	}
}

// TestConfigPrecedence checks flag > env > file > default, key by key.
func TestConfigPrecedence(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "nereus.yaml")
	err := os.WriteFile(file, []byte(`
data-dir: /from/file
http-addr: 127.0.0.1:1111
kafka-addr: ""
pulsar-addr: 127.0.0.1:2222
log-level: debug
shutdown-timeout: 5s
`), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	env := envOf(map[string]string{
		"NEREUS_CONFIG":      file,
		"NEREUS_HTTP_ADDR":   "127.0.0.1:3333",
		"NEREUS_PULSAR_ADDR": "127.0.0.1:4444",
		"NEREUS_LOG_FORMAT":  "json",
	})
	cfg, err := LoadConfig(parseFlags(t, "--pulsar-addr", "127.0.0.1:5555", "--bookkeeper-zk", "127.0.0.1:2181"), env)
	if err != nil {
		t.Fatal(err)
	}
	want := DefaultConfig()
	want.DataDir = "/from/file"          // file only
	want.HTTPAddr = "127.0.0.1:3333"     // env beats file
	want.KafkaAddr = ""                  // file disables it
	want.PulsarAddr = "127.0.0.1:5555"   // flag beats env and file
	want.BookKeeperZK = "127.0.0.1:2181" // flag only
	want.LogLevel = "debug"
	want.LogFormat = "json"
	want.ShutdownTimeout = 5 * time.Second
	if cfg != want {
		t.Fatalf("got  %+v\nwant %+v", cfg, want)
	}

	// --config beats NEREUS_CONFIG.
	other := filepath.Join(dir, "other.yaml")
	if err := os.WriteFile(other, []byte("data-dir: /other\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err = LoadConfig(parseFlags(t, "--config", other), envOf(map[string]string{"NEREUS_CONFIG": file}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.DataDir != "/other" || cfg.HTTPAddr != DefaultConfig().HTTPAddr {
		t.Fatalf("--config did not win over NEREUS_CONFIG: %+v", cfg)
	}
}

func TestConfigErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cases := []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"unknown file key", []string{"--config", write("a.yaml", "data_dir: x\n")}, nil, `unknown key "data_dir"`},
		{"bad yaml", []string{"--config", write("b.yaml", "data-dir: [\n")}, nil, "b.yaml"},
		{"non-scalar", []string{"--config", write("c.yaml", "data-dir: {a: 1}\n")}, nil, "want a scalar"},
		{"missing file", []string{"--config", filepath.Join(dir, "nope.yaml")}, nil, "config file"},
		{"bad duration env", nil, map[string]string{"NEREUS_SHUTDOWN_TIMEOUT": "soon"}, "NEREUS_SHUTDOWN_TIMEOUT"},
		{"bad level", []string{"--log-level", "loud"}, nil, "log-level"},
		{"bad format", []string{"--log-format", "xml"}, nil, "log-format"},
		{"bad addr", []string{"--kafka-addr", "nonsense"}, nil, "kafka-addr"},
		{"empty http", []string{"--http-addr", ""}, nil, "http-addr"},
		{"relative bk root", []string{"--bookkeeper-zk", "h:1", "--bookkeeper-root", "ledgers"}, nil, "bookkeeper-root"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LoadConfig(parseFlags(t, tc.args...), envOf(tc.env))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got error %v, want one mentioning %q", err, tc.want)
			}
		})
	}
}

func TestNodeIDStable(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	a, err := loadNodeID(dir)
	if err != nil {
		t.Fatal(err)
	}
	b, err := loadNodeID(dir)
	if err != nil {
		t.Fatal(err)
	}
	if a == "" || a != b {
		t.Fatalf("node id not stable: %q then %q", a, b)
	}
}
