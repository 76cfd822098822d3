package listener

import (
	"errors"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
)

// Protocol is the wire protocol a listener speaks.
type Protocol string

// The protocols of a Nereus process.
const (
	Kafka  Protocol = "kafka"
	Pulsar Protocol = "pulsar"
	HTTP   Protocol = "http"
)

// Security is how a listener protects its connections.
type Security struct {
	// TLS wraps every connection in TLS (Kafka SSL / SASL_SSL,
	// pulsar+ssl://, https://).
	TLS bool `json:"tls,omitempty"`
	// SASL requires Kafka SASL authentication before any request other
	// than ApiVersions and the SASL exchange itself (SASL_PLAINTEXT,
	// SASL_SSL). Kafka only.
	SASL bool `json:"sasl,omitempty"`
}

// Kafka security protocol names (listener.security.protocol.map values).
const (
	KafkaPlaintext     = "PLAINTEXT"
	KafkaSSL           = "SSL"
	KafkaSASLPlaintext = "SASL_PLAINTEXT"
	KafkaSASLSSL       = "SASL_SSL"
)

var kafkaSecurity = map[string]Security{
	KafkaPlaintext:     {},
	KafkaSSL:           {TLS: true},
	KafkaSASLPlaintext: {SASL: true},
	KafkaSASLSSL:       {TLS: true, SASL: true},
}

// KafkaSecurityProtocol is the Kafka name of a security setting
// (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL).
func KafkaSecurityProtocol(s Security) string {
	switch {
	case s.TLS && s.SASL:
		return KafkaSASLSSL
	case s.TLS:
		return KafkaSSL
	case s.SASL:
		return KafkaSASLPlaintext
	}
	return KafkaPlaintext
}

// DefaultName is the listener name of Pulsar and HTTP listeners written
// without one (Pulsar's advertisedListeners convention: a name groups one
// plaintext and one TLS address).
const DefaultName = "internal"

// Spec is one configured listener.
type Spec struct {
	Protocol Protocol
	// Name identifies the listener within its protocol. Kafka: the listener
	// name (PLAINTEXT, SASL_SSL, or a custom name mapped to a security
	// protocol), unique. Pulsar and HTTP: the listener group a client may
	// ask for (Pulsar's advertised_listener_name); a group holds at most
	// one plaintext and one TLS listener.
	Name     string
	Security Security
	// Bind is the host:port to listen on (port 0 picks a free port).
	Bind string
	// Advertise is the host:port clients are told to dial; empty means the
	// bound address (or, for a wildcard bind, the address the client
	// reached).
	Advertise string
}

// Scheme is the URL scheme clients use for the listener: pulsar,
// pulsar+ssl, http, https; for Kafka the security protocol name.
func (s Spec) Scheme() string { return scheme(s.Protocol, s.Security) }

func scheme(p Protocol, sec Security) string {
	switch p {
	case Pulsar:
		if sec.TLS {
			return "pulsar+ssl"
		}
		return "pulsar"
	case HTTP:
		if sec.TLS {
			return "https"
		}
		return "http"
	}
	return KafkaSecurityProtocol(sec)
}

// ID names the listener uniquely in the process: "kafka:SASL_SSL",
// "pulsar:internal:pulsar+ssl", "http:internal:https".
func (s Spec) ID() string {
	if s.Protocol == Kafka {
		return string(s.Protocol) + ":" + s.Name
	}
	return string(s.Protocol) + ":" + s.Name + ":" + s.Scheme()
}

func (s Spec) String() string {
	if s.Protocol == Kafka {
		return fmt.Sprintf("kafka %s://%s (%s)", s.Name, s.Bind, KafkaSecurityProtocol(s.Security))
	}
	return fmt.Sprintf("%s %s:%s://%s", s.Protocol, s.Name, s.Scheme(), s.Bind)
}

// Endpoint is an advertised address: what a front end tells clients to
// dial (Kafka Metadata brokers, Pulsar LOOKUP URLs, HTTP lookup URLs) and
// what a broker registry stores for each node.
type Endpoint struct {
	Protocol Protocol `json:"protocol"`
	Name     string   `json:"name"`
	Security Security `json:"security"`
	// Host is empty when the listener binds a wildcard address with no
	// advertised address: the client is then told the address it reached
	// (AdvertisedFor).
	Host string `json:"host"`
	Port int    `json:"port"`
}

// Addr is host:port.
func (e Endpoint) Addr() string { return net.JoinHostPort(e.Host, strconv.Itoa(e.Port)) }

// URL is scheme://host:port (Kafka: SECURITY_PROTOCOL://host:port).
func (e Endpoint) URL() string { return scheme(e.Protocol, e.Security) + "://" + e.Addr() }

// ParseKafka parses Kafka's listener settings: listeners is
// "NAME://HOST:PORT[,...]" (Kafka's `listeners`), advertised is the same
// shape for a subset of the names (`advertised.listeners`), and protoMap
// is "NAME:SECURITY_PROTOCOL[,...]" (`listener.security.protocol.map`,
// merged over the identity map of the four protocol names). An empty HOST
// binds every interface, as in Kafka.
func ParseKafka(listeners, advertised, protoMap string) ([]Spec, error) {
	sec := map[string]Security{}
	for k, v := range kafkaSecurity {
		sec[k] = v
	}
	for _, e := range splitList(protoMap) {
		name, proto, ok := strings.Cut(e, ":")
		s, known := kafkaSecurity[strings.ToUpper(strings.TrimSpace(proto))]
		if !ok || !known || strings.TrimSpace(name) == "" {
			return nil, fmt.Errorf("kafka listener security protocol map entry %q: want NAME:PLAINTEXT|SSL|SASL_PLAINTEXT|SASL_SSL", e)
		}
		sec[strings.TrimSpace(name)] = s
	}
	var specs []Spec
	seen := map[string]bool{}
	for _, e := range splitList(listeners) {
		name, hostport, err := splitKafkaEntry(e)
		if err != nil {
			return nil, fmt.Errorf("kafka listener %q: %w", e, err)
		}
		s, ok := sec[name]
		if !ok {
			return nil, fmt.Errorf("kafka listener %q: name %s is not a security protocol and not in the listener security protocol map", e, name)
		}
		if seen[name] {
			return nil, fmt.Errorf("kafka listener name %s used twice", name)
		}
		seen[name] = true
		specs = append(specs, Spec{Protocol: Kafka, Name: name, Security: s, Bind: hostport})
	}
	adv, err := parseAdvertised(advertised, func(e string) (string, string, error) {
		name, hp, err := splitKafkaEntry(e)
		return name, hp, err
	})
	if err != nil {
		return nil, fmt.Errorf("kafka advertised listeners: %w", err)
	}
	if err := applyAdvertised(specs, adv, func(s Spec) string { return s.Name }); err != nil {
		return nil, fmt.Errorf("kafka advertised listeners: %w", err)
	}
	return specs, checkBinds(specs)
}

func splitKafkaEntry(e string) (name, hostport string, err error) {
	name, hostport, ok := strings.Cut(e, "://")
	if !ok || name == "" {
		return "", "", errors.New("want NAME://HOST:PORT")
	}
	if _, _, err := net.SplitHostPort(hostport); err != nil {
		return "", "", fmt.Errorf("want NAME://HOST:PORT: %v", err)
	}
	return name, hostport, nil
}

// ParsePulsar parses "[NAME:]pulsar://HOST:PORT" and
// "[NAME:]pulsar+ssl://HOST:PORT" lists (NAME defaults to "internal"), for
// the listeners and, by name and scheme, their advertised addresses
// (Pulsar's advertisedListeners syntax).
func ParsePulsar(listeners, advertised string) ([]Spec, error) {
	return parseURLs(Pulsar, map[string]Security{"pulsar": {}, "pulsar+ssl": {TLS: true}}, listeners, advertised)
}

// ParseHTTP parses "[NAME:]http://HOST:PORT" and "[NAME:]https://HOST:PORT"
// lists like ParsePulsar.
func ParseHTTP(listeners, advertised string) ([]Spec, error) {
	return parseURLs(HTTP, map[string]Security{"http": {}, "https": {TLS: true}}, listeners, advertised)
}

func parseURLs(p Protocol, schemes map[string]Security, listeners, advertised string) ([]Spec, error) {
	split := func(e string) (key, hostport string, err error) {
		head, hostport, ok := strings.Cut(e, "://")
		if !ok {
			return "", "", fmt.Errorf("want [NAME:]SCHEME://HOST:PORT")
		}
		name, sch := DefaultName, head
		if i := strings.LastIndex(head, ":"); i >= 0 {
			name, sch = head[:i], head[i+1:]
		}
		if _, ok := schemes[sch]; !ok || name == "" {
			return "", "", fmt.Errorf("want [NAME:]SCHEME://HOST:PORT with SCHEME one of %s", strings.Join(sortedKeys(schemes), ", "))
		}
		if _, _, err := net.SplitHostPort(hostport); err != nil {
			return "", "", fmt.Errorf("want [NAME:]SCHEME://HOST:PORT: %v", err)
		}
		return name + ":" + sch, hostport, nil
	}
	var specs []Spec
	seen := map[string]bool{}
	for _, e := range splitList(listeners) {
		key, hp, err := split(e)
		if err != nil {
			return nil, fmt.Errorf("%s listener %q: %w", p, e, err)
		}
		if seen[key] {
			return nil, fmt.Errorf("%s listener %s used twice (a name holds one plaintext and one TLS listener)", p, key)
		}
		seen[key] = true
		name, sch, _ := strings.Cut(key, ":")
		specs = append(specs, Spec{Protocol: p, Name: name, Security: schemes[sch], Bind: hp})
	}
	adv, err := parseAdvertised(advertised, split)
	if err != nil {
		return nil, fmt.Errorf("%s advertised listeners: %w", p, err)
	}
	if err := applyAdvertised(specs, adv, func(s Spec) string { return s.Name + ":" + s.Scheme() }); err != nil {
		return nil, fmt.Errorf("%s advertised listeners: %w", p, err)
	}
	return specs, checkBinds(specs)
}

func parseAdvertised(list string, split func(string) (string, string, error)) (map[string]string, error) {
	out := map[string]string{}
	for _, e := range splitList(list) {
		key, hp, err := split(e)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", e, err)
		}
		if err := dialable(hp); err != nil {
			return nil, fmt.Errorf("%q: %w", e, err)
		}
		if _, dup := out[key]; dup {
			return nil, fmt.Errorf("%s advertised twice", key)
		}
		out[key] = hp
	}
	return out, nil
}

func applyAdvertised(specs []Spec, adv map[string]string, key func(Spec) string) error {
	for i := range specs {
		if hp, ok := adv[key(specs[i])]; ok {
			specs[i].Advertise = hp
			delete(adv, key(specs[i]))
		}
	}
	for k := range adv {
		return fmt.Errorf("%s names no listener", k)
	}
	return nil
}

// CheckAdvertise rejects an advertised host:port a client cannot dial
// (no host, a wildcard host, a bad port).
func CheckAdvertise(hostport string) error { return dialable(hostport) }

// dialable rejects advertised addresses a client cannot dial.
func dialable(hostport string) error {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return err
	}
	if p, err := strconv.Atoi(port); err != nil || p <= 0 || p > 65535 {
		return fmt.Errorf("bad port %q", port)
	}
	if host == "" {
		return errors.New("an advertised address needs a host")
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		return fmt.Errorf("%s is not an address clients can dial", host)
	}
	return nil
}

// checkBinds rejects two listeners on one fixed port of one host.
func checkBinds(specs []Spec) error {
	seen := map[string]string{}
	for _, s := range specs {
		host, port, _ := net.SplitHostPort(s.Bind)
		if port == "0" {
			continue
		}
		k := host + "|" + port
		if other, ok := seen[k]; ok {
			return fmt.Errorf("listeners %s and %s bind the same address %s", other, s.ID(), s.Bind)
		}
		seen[k] = s.ID()
	}
	return nil
}

// CheckUnique rejects specs (of any protocols) sharing an ID or a fixed
// bind address.
func CheckUnique(specs []Spec) error {
	ids := map[string]bool{}
	for _, s := range specs {
		if ids[s.ID()] {
			return fmt.Errorf("listener %s configured twice", s.ID())
		}
		ids[s.ID()] = true
	}
	return checkBinds(specs)
}

func splitList(s string) []string {
	var out []string
	for _, e := range strings.Split(s, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// Loopback reports whether a bind address accepts only connections from
// this machine (127.0.0.0/8, ::1, "localhost"). A wildcard or empty host,
// or any other name, is not loopback.
func Loopback(bind string) bool {
	host, _, err := net.SplitHostPort(bind)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Exposure says why a listener is exposed, or "" when it is not: it binds
// a non-loopback address and has no TLS, or (authenticated false) lets
// clients in without authentication.
func Exposure(s Spec, authenticated bool) string {
	if Loopback(s.Bind) {
		return ""
	}
	var why []string
	if !s.Security.TLS {
		why = append(why, "no TLS")
	}
	if !authenticated {
		why = append(why, "no authentication")
	}
	if len(why) == 0 {
		return ""
	}
	return s.ID() + " on " + s.Bind + ": " + strings.Join(why, ", ")
}
