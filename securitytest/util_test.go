package securitytest

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/pulsar-client-go/pulsar/log"
	"github.com/sirupsen/logrus"
)

func itoa(i int32) string { return strconv.Itoa(int(i)) }

func quietPulsarLog() log.Logger {
	l := logrus.New()
	l.SetOutput(io.Discard)
	return log.NewLoggerWithLogrus(l)
}

// metric sums the samples of a counter or gauge family on the plaintext
// admin listener's /metrics.
func metric(t testing.TB, family string) float64 {
	t.Helper()
	resp, err := http.Get(srv.URL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	sum := 0.0
	for _, line := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(line, family+" ") && !strings.HasPrefix(line, family+"{") {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err == nil {
			sum += v
		}
	}
	return sum
}
