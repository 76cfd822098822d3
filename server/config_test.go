package server

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/nereusstream/nereus-go/listener"
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

func TestListenerSpecs(t *testing.T) {
	cfg, err := LoadConfig(parseFlags(t), envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	specs, err := cfg.ListenerSpecs()
	if err != nil || len(specs) != 3 || specs[0].ID() != "http:internal:http" || specs[1].ID() != "kafka:PLAINTEXT" ||
		specs[2].ID() != "pulsar:internal:pulsar" || specs[1].Bind != "127.0.0.1:9092" {
		t.Fatalf("default specs: %+v %v", specs, err)
	}
	dir := t.TempDir()
	cfg, err = LoadConfig(parseFlags(t,
		"--kafka-listeners", "PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9093",
		"--kafka-advertised-listeners", "SSL://kafka.example:9093",
		"--pulsar-listeners", "pulsar://127.0.0.1:6650,pulsar+ssl://127.0.0.1:6651",
		"--http-listeners", "https://127.0.0.1:8443",
		"--tls-cert-file", dir+"/c.pem", "--tls-key-file", dir+"/k.pem"), envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	specs, _ = cfg.ListenerSpecs()
	var ids []string
	for _, s := range specs {
		ids = append(ids, s.ID()+"="+s.Bind+">"+s.Advertise)
	}
	want := "http:internal:https=127.0.0.1:8443> kafka:PLAINTEXT=127.0.0.1:9092> kafka:SSL=127.0.0.1:9093>kafka.example:9093 " +
		"pulsar:internal:pulsar=127.0.0.1:6650> pulsar:internal:pulsar+ssl=127.0.0.1:6651>"
	if got := strings.Join(ids, " "); got != want {
		t.Fatalf("specs\n got %s\nwant %s", got, want)
	}
	for _, bad := range [][]string{
		{"--kafka-listeners", "PLAINTEXT://127.0.0.1:1", "--kafka-addr", "127.0.0.1:2"},                // both forms
		{"--kafka-listeners", "PLAINTEXT://127.0.0.1:1", "--kafka-advertised-addr", "h:1"},             // mixed advertised
		{"--kafka-listeners", "SSL://127.0.0.1:1"},                                                     // TLS without cert
		{"--tls-cert-file", "c.pem"},                                                                   // cert without key
		{"--tls-cert-file", "c", "--tls-key-file", "k", "--tls-client-auth", "required"},               // client auth without CA
		{"--tls-client-auth", "sometimes"},                                                             // bad value
		{"--http-addr", ""},                                                                            // no admin listener
		{"--kafka-advertised-addr", "0.0.0.0:9092"},                                                    // wildcard advertised
		{"--pulsar-listeners", "pulsar://127.0.0.1:1", "--kafka-listeners", "PLAINTEXT://127.0.0.1:1"}, // same port
	} {
		if _, err := LoadConfig(parseFlags(t, bad...), envOf(nil)); err == nil {
			t.Errorf("accepted %v", bad)
		}
	}
}

func TestExposureWarning(t *testing.T) {
	var buf strings.Builder
	log := slog.New(slog.NewTextHandler(&buf, nil))
	cfg := DefaultConfig()
	warnExposed(log, cfg, []listener.Spec{
		{Protocol: listener.Kafka, Name: "PLAINTEXT", Bind: "127.0.0.1:9092"},
		{Protocol: listener.Kafka, Name: "SSL", Security: listener.Security{TLS: true}, Bind: "0.0.0.0:9093"},
		{Protocol: listener.HTTP, Name: "internal", Bind: "[::]:8080"},
	})
	out := buf.String()
	if strings.Count(out, "SECURITY WARNING") != 1 || !strings.Contains(out, "kafka:SSL on 0.0.0.0:9093: no authentication") ||
		!strings.Contains(out, "http:internal:http on [::]:8080: no TLS, no authentication") || strings.Contains(out, "PLAINTEXT") {
		t.Fatalf("warning: %s", out)
	}
	buf.Reset()
	warnExposed(log, cfg, []listener.Spec{{Protocol: listener.Kafka, Name: "PLAINTEXT", Bind: "localhost:9092"}})
	if buf.Len() != 0 {
		t.Fatalf("loopback warned: %s", buf.String())
	}
}
