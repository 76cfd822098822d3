package server

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/nereusstream/nereus-go/listener"
)

// ListenerSpecs returns every listener the configuration asks for, HTTP
// first, then Kafka, then Pulsar.
//
// Each protocol takes either its list setting (kafka-listeners,
// pulsar-listeners, http-listeners: several listeners, each with its own
// security and advertised address) or the single-address shorthand
// (kafka-addr + kafka-advertised-addr, ...: one plaintext listener). The
// two forms do not mix for one protocol.
func (c Config) ListenerSpecs() ([]listener.Spec, error) {
	def := DefaultConfig()
	var out []listener.Spec
	var errs []error
	one := func(p listener.Protocol, list, adv, addr, defAddr, advAddr, key string, parse func() ([]listener.Spec, error), name string) {
		if list != "" || adv != "" {
			if addr != "" && addr != defAddr {
				errs = append(errs, fmt.Errorf("%s-addr and %s-listeners are both set: list every %s listener in %s-listeners", key, key, p, key))
				return
			}
			if advAddr != "" {
				errs = append(errs, fmt.Errorf("%s-advertised-addr goes with %s-addr; with %s-listeners use %s-advertised-listeners", key, key, key, key))
				return
			}
			if list == "" {
				errs = append(errs, fmt.Errorf("%s-advertised-listeners needs %s-listeners", key, key))
				return
			}
			specs, err := parse()
			if err != nil {
				errs = append(errs, err)
				return
			}
			out = append(out, specs...)
			return
		}
		if addr == "" {
			return
		}
		if advAddr != "" {
			if err := listener.CheckAdvertise(advAddr); err != nil {
				errs = append(errs, fmt.Errorf("%s-advertised-addr %q: %w", key, advAddr, err))
				return
			}
		}
		s := listener.Spec{Protocol: p, Name: name, Bind: addr, Advertise: advAddr}
		out = append(out, s)
	}
	one(listener.HTTP, c.HTTPListeners, c.HTTPAdvertisedListeners, c.HTTPAddr, def.HTTPAddr, c.HTTPAdvertisedAddr, "http",
		func() ([]listener.Spec, error) { return listener.ParseHTTP(c.HTTPListeners, c.HTTPAdvertisedListeners) }, listener.DefaultName)
	one(listener.Kafka, c.KafkaListeners, c.KafkaAdvertisedListeners, c.KafkaAddr, def.KafkaAddr, c.KafkaAdvertisedAddr, "kafka",
		func() ([]listener.Spec, error) {
			return listener.ParseKafka(c.KafkaListeners, c.KafkaAdvertisedListeners, c.KafkaListenerSecurityProtocolMap)
		}, listener.KafkaPlaintext)
	one(listener.Pulsar, c.PulsarListeners, c.PulsarAdvertisedListeners, c.PulsarAddr, def.PulsarAddr, c.PulsarAdvertisedAddr, "pulsar",
		func() ([]listener.Spec, error) {
			return listener.ParsePulsar(c.PulsarListeners, c.PulsarAdvertisedListeners)
		}, listener.DefaultName)
	if c.KafkaListenerSecurityProtocolMap != "" && c.KafkaListeners == "" {
		errs = append(errs, errors.New("kafka-listener-security-protocol-map needs kafka-listeners"))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if err := listener.CheckUnique(out); err != nil {
		return nil, err
	}
	return out, nil
}

// TLSFiles is the TLS material of every TLS listener.
func (c Config) TLSFiles() listener.TLSFiles {
	return listener.TLSFiles{CertFile: c.TLSCertFile, KeyFile: c.TLSKeyFile, CAFile: c.TLSCAFile,
		ClientAuth: listener.ClientAuth(c.TLSClientAuth)}
}

// validateListeners checks the listener and TLS settings together.
func (c Config) validateListeners() []error {
	var errs []error
	specs, err := c.ListenerSpecs()
	if err != nil {
		return []error{err}
	}
	hasHTTP, anyTLS := false, false
	for _, s := range specs {
		if s.Protocol == listener.HTTP {
			hasHTTP = true
		}
		if s.Security.TLS {
			anyTLS = true
		}
	}
	if !hasHTTP {
		errs = append(errs, errors.New("an HTTP listener is needed (http-addr or http-listeners): the admin API and /healthz live there"))
	}
	f := c.TLSFiles()
	if err := f.Validate(); err != nil {
		errs = append(errs, err)
	}
	if anyTLS && !f.Configured() {
		errs = append(errs, errors.New("a TLS listener is configured but tls-cert-file and tls-key-file are not"))
	}
	if c.TLSReloadInterval < 0 {
		errs = append(errs, fmt.Errorf("tls-reload-interval %v must not be negative", c.TLSReloadInterval))
	}
	return errs
}

// warnExposed logs one loud warning naming every listener bound to a
// non-loopback address without TLS or without authentication.
func warnExposed(log *slog.Logger, cfg Config, specs []listener.Spec) {
	var exposed []string
	for _, s := range specs {
		if why := listener.Exposure(s, cfg.listenerAuthenticated(s)); why != "" {
			exposed = append(exposed, why)
		}
	}
	if len(exposed) == 0 {
		return
	}
	log.Warn("SECURITY WARNING: listeners reachable beyond this machine without TLS or authentication; "+
		"anyone who can reach them can read, write and delete data. Bind 127.0.0.1, or enable TLS "+
		"(--tls-cert-file/--tls-key-file and SSL, SASL_SSL, pulsar+ssl://, https:// listeners) and authentication "+
		"(see `nereus serve --help`)", "exposed", strings.Join(exposed, "; "))
}

// defaultTLSReloadInterval is how often TLS files are checked for changes.
const defaultTLSReloadInterval = 30 * time.Second
