// Package opstest holds the operator-facing end-to-end tests of a real
// `nereus serve` (built by internal/testserver) carrying data from real
// clients (REST, franz-go, pulsar-client-go, and BookKeeper when the test
// environment has bookies): the /metrics family listing, the Grafana
// dashboard's schema and the metrics it queries, and the web console in
// headless Chromium. One server is shared by the whole package.
//
// It contains tests only. It must never be imported, and never reach into
// the server's internals: it talks to the process over its ports like an
// operator and their tools do.
package opstest
