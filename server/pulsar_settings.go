package server

import (
	"fmt"
	"time"

	"github.com/nereusstream/nereus-go/managedledger"
	"github.com/nereusstream/nereus-go/pulsar/wire"
)

// PulsarSettings configure the Pulsar front end's broker policies. The names
// follow Apache Pulsar's broker.conf where one exists.
type PulsarSettings struct {
	// MaxMessageSize is the largest message (entry) accepted and announced
	// to clients (Pulsar's maxMessageSize; default 5 MiB).
	MaxMessageSize int64
	// DefaultRetentionMinutes and DefaultRetentionSizeMB are the retention
	// of topics with no topic or namespace policy (Pulsar's
	// defaultRetentionTimeInMinutes / defaultRetentionSizeInMB; -1 =
	// unlimited). Default -1/-1: keep everything. Apache Pulsar's 0/0
	// deletes what every subscription acknowledged at once, and a topic's
	// whole content when it has no subscription.
	DefaultRetentionMinutes int64
	DefaultRetentionSizeMB  int64
	// BacklogQuotaCheckInterval is how often topics are checked against
	// their backlog quotas (Pulsar's backlogQuotaCheckIntervalInSeconds;
	// default 60s).
	BacklogQuotaCheckInterval time.Duration
}

// DefaultPulsarSettings returns the defaults.
func DefaultPulsarSettings() PulsarSettings {
	return PulsarSettings{MaxMessageSize: wire.DefaultMaxMessageSize, DefaultRetentionMinutes: -1, DefaultRetentionSizeMB: -1,
		BacklogQuotaCheckInterval: time.Minute}
}

func (p PulsarSettings) validate() []error {
	var errs []error
	if p.MaxMessageSize < 1024 || p.MaxMessageSize > 64<<20 {
		errs = append(errs, fmt.Errorf("pulsar-max-message-size %d must be between 1KiB and 64MiB", p.MaxMessageSize))
	}
	if p.DefaultRetentionMinutes < -1 || p.DefaultRetentionSizeMB < -1 {
		errs = append(errs, fmt.Errorf("pulsar-default-retention-minutes %d / -size-mb %d must be >= -1 (-1 = unlimited)",
			p.DefaultRetentionMinutes, p.DefaultRetentionSizeMB))
	}
	if p.BacklogQuotaCheckInterval <= 0 {
		errs = append(errs, fmt.Errorf("pulsar-backlog-quota-check-interval %v must be positive", p.BacklogQuotaCheckInterval))
	}
	return errs
}

func (p PulsarSettings) defaultRetention() *managedledger.RetentionPolicies {
	return &managedledger.RetentionPolicies{RetentionTimeInMinutes: int(p.DefaultRetentionMinutes), RetentionSizeInMB: p.DefaultRetentionSizeMB}
}

var pulsarSettings = []setting{
	bytesSetting("pulsar-max-message-size", "largest Pulsar message accepted and announced to clients (Pulsar's maxMessageSize)", func(c *Config) *int64 { return &c.Pulsar.MaxMessageSize }),
	intSetting("pulsar-default-retention-minutes", "retention time of Pulsar topics without a policy, for what every subscription acknowledged (-1 unlimited; Pulsar's defaultRetentionTimeInMinutes)", func(c *Config) *int64 { return &c.Pulsar.DefaultRetentionMinutes }),
	intSetting("pulsar-default-retention-size-mb", "retention size of Pulsar topics without a policy (-1 unlimited; Pulsar's defaultRetentionSizeInMB)", func(c *Config) *int64 { return &c.Pulsar.DefaultRetentionSizeMB }),
	durSetting("pulsar-backlog-quota-check-interval", "how often Pulsar topics are checked against their backlog quotas (Pulsar's backlogQuotaCheckIntervalInSeconds)", func(c *Config) *time.Duration { return &c.Pulsar.BacklogQuotaCheckInterval }),
}

func init() { settings = append(settings, pulsarSettings...) }
