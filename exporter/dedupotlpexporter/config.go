package dedupotlpexporter

import (
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/config/configretry"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/collector/exporter/otlpexporter"
	"go.opentelemetry.io/collector/exporter/otlphttpexporter"
)

// DefaultMaxRequestBytes is the collector's default gRPC receive limit
// (4 MiB) less 64 KiB of headroom for framing and compression's worst case.
const DefaultMaxRequestBytes = 4<<20 - 64<<10

// DefaultGroupCommitMaxItems matches the batch processor's default batch.
const DefaultGroupCommitMaxItems = 8192

// DefaultDirectSlowAfter is how long a direct send may run before the
// requests that arrive meanwhile go to the sending queue instead of
// waiting for it.
const DefaultDirectSlowAfter = time.Second

// DefaultKeptBytes bounds the encoded queue entries whose requests are
// kept in memory until the queue's consumer takes them (kept.go): a
// lone sender's entries are taken within milliseconds, and a backlog
// decodes what this does not hold.
const DefaultKeptBytes = 4 << 20

// maxKeptBytes is the largest kept_bytes.
const maxKeptBytes = 1 << 30

// Config is the inner exporter's config plus what the wrapper adds.
type Config struct {
	// Exporter is the otlp_grpc or otlp_http config, as written.
	Exporter component.Config
	// Dedup is the processor whose records lost items are taken back from.
	Dedup component.ID `mapstructure:"dedup"`
	// MaxRequestBytes is the largest request the upstream takes.
	MaxRequestBytes int `mapstructure:"max_request_bytes"`
	// GroupCommit merges client requests that arrive while the sending
	// queue is writing another into one queue entry.
	GroupCommit GroupCommitConfig `mapstructure:"group_commit"`
	// Direct sends requests straight to the upstream while the sending
	// queue is empty.
	Direct DirectConfig `mapstructure:"direct"`
	// KeptBytes bounds the persistent queue's entries (encoded bytes)
	// whose requests are kept in memory from their write until the
	// queue's consumer takes them, so that it takes the request instead
	// of decoding the entry (kept.go); the oldest are pushed out first
	// and decoded when taken. 0: every entry is decoded.
	KeptBytes int64 `mapstructure:"kept_bytes"`
}

// DirectConfig sends each request at least as large as the queue's batch
// (sending_queue::batch::min_size, when sized in bytes) straight to the
// upstream, and answers its sender with the upstream's answer, while the
// sending queue is empty: then nothing is written to the queue's storage.
// A smaller request goes to the queue, which sends it with others. Requests that arrive
// while a direct send is under way wait for it and are sent together (at
// most max_request_bytes, encoded), unless it has run longer than
// SlowAfter: then they go to the sending queue. A direct send is bounded
// by the exporter's timeout only; what it fails to deliver with a
// retryable error (a timeout included) goes to the queue, and while the
// queue holds anything every request goes there, so that nothing
// overtakes a backlog. Items the upstream refuses for good are handed
// back to dedup, as from the queue. Requests carrying client metadata or
// authentication data are sent alone. It needs sending_queue and reads
// the queue's size from its metrics (off when the service's metrics are).
type DirectConfig struct {
	Enabled   bool          `mapstructure:"enabled"`
	SlowAfter time.Duration `mapstructure:"slow_after"`
}

// GroupCommitConfig bounds the requests written to the sending queue as
// one entry: while the queue writes one request, the requests that arrive
// wait, and the first of them then writes them all at once, up to MaxItems
// spans, log records or metric points together (a single larger request
// goes alone). With MaxDelay, a request that finds the queue still holding
// earlier entries waits for it to empty, at most MaxDelay and only until
// the requests that arrive meanwhile fill MaxItems, gathering them: bbolt
// rewrites the entries sharing a page at every change, so fewer entries
// held means fewer bytes written. Every request is still answered only
// once its entry is in the queue. Requests carrying client metadata or
// authentication data are never merged, as the exporter may take headers
// from them. MaxItems 0 turns it off; it needs sending_queue; MaxDelay
// reads the queue's size from its metrics (off when the service's metrics
// are).
type GroupCommitConfig struct {
	MaxItems int           `mapstructure:"max_items"`
	MaxDelay time.Duration `mapstructure:"max_delay"`
}

var (
	_ confmap.Unmarshaler = (*Config)(nil)
	_ component.Config    = (*Config)(nil)
)

// Unmarshal takes the wrapper's own keys and gives the rest to the inner
// exporter's config, so that every otlp_grpc/otlp_http key works as there.
func (c *Config) Unmarshal(conf *confmap.Conf) error {
	own, rest := map[string]any{}, map[string]any{}
	for k, v := range conf.ToStringMap() {
		switch k {
		case "dedup", "max_request_bytes", "group_commit", "direct", "kept_bytes":
			own[k] = v
		default:
			rest[k] = v
		}
	}
	keys := struct {
		Dedup           component.ID      `mapstructure:"dedup"`
		MaxRequestBytes int               `mapstructure:"max_request_bytes"`
		GroupCommit     GroupCommitConfig `mapstructure:"group_commit"`
		Direct          DirectConfig      `mapstructure:"direct"`
		KeptBytes       int64             `mapstructure:"kept_bytes"`
	}{c.Dedup, c.MaxRequestBytes, c.GroupCommit, c.Direct, c.KeptBytes}
	if err := confmap.NewFromStringMap(own).Unmarshal(&keys); err != nil {
		return err
	}
	c.Dedup, c.MaxRequestBytes, c.GroupCommit, c.Direct, c.KeptBytes = keys.Dedup, keys.MaxRequestBytes, keys.GroupCommit, keys.Direct, keys.KeptBytes
	return confmap.NewFromStringMap(rest).Unmarshal(c.Exporter)
}

// Validate checks the wrapper's fields; the inner config is validated by
// the collector as a field of this one.
func (c *Config) Validate() error {
	if c.MaxRequestBytes < 1024 {
		return fmt.Errorf("max_request_bytes must be at least 1024, got %d", c.MaxRequestBytes)
	}
	if c.GroupCommit.MaxItems < 0 {
		return fmt.Errorf("group_commit::max_items must be 0 (off) or positive, got %d", c.GroupCommit.MaxItems)
	}
	if c.GroupCommit.MaxDelay < 0 || c.GroupCommit.MaxDelay > time.Minute {
		return fmt.Errorf("group_commit::max_delay must be between 0 and 1m, got %s", c.GroupCommit.MaxDelay)
	}
	if c.KeptBytes < 0 || c.KeptBytes > maxKeptBytes {
		return fmt.Errorf("kept_bytes must be between 0 (off) and %d, got %d", maxKeptBytes, c.KeptBytes)
	}
	q, _ := queueAndRetry(c.Exporter)
	if c.Direct.Enabled {
		if c.Direct.SlowAfter <= 0 || c.Direct.SlowAfter > time.Minute {
			return fmt.Errorf("direct::slow_after must be between 1ns and 1m, got %s", c.Direct.SlowAfter)
		}
		if !q.HasValue() {
			return errors.New("direct::enabled needs sending_queue: what the upstream does not take goes there")
		}
	}
	if !q.HasValue() || !q.Get().Batch.HasValue() {
		return nil
	}
	b := q.Get().Batch.Get()
	if b.Sizer.String() != "bytes" {
		return fmt.Errorf("sending_queue::batch::sizer must be bytes (got %q), so that a merged batch stays under max_request_bytes", b.Sizer.String())
	}
	if b.MaxSize <= 0 || b.MaxSize > int64(c.MaxRequestBytes) {
		return fmt.Errorf("sending_queue::batch::max_size must be between 1 and max_request_bytes (%d), got %d", c.MaxRequestBytes, b.MaxSize)
	}
	return nil
}

// queueAndRetry returns the queue and retry settings of an inner config.
func queueAndRetry(cfg component.Config) (configoptional.Optional[exporterhelper.QueueBatchConfig], configretry.BackOffConfig) {
	switch c := cfg.(type) {
	case *otlpexporter.Config:
		return c.QueueConfig, c.RetryConfig
	case *otlphttpexporter.Config:
		return c.QueueConfig, c.RetryConfig
	}
	return configoptional.None[exporterhelper.QueueBatchConfig](), configretry.BackOffConfig{}
}

// innerConfig is a copy of cfg with its queue and retries off: they run in
// the wrapper, around the inner exporter's synchronous send.
func innerConfig(cfg component.Config) component.Config {
	switch c := cfg.(type) {
	case *otlpexporter.Config:
		cp := *c
		cp.QueueConfig = configoptional.None[exporterhelper.QueueBatchConfig]()
		cp.RetryConfig.Enabled = false
		return &cp
	case *otlphttpexporter.Config:
		cp := *c
		cp.QueueConfig = configoptional.None[exporterhelper.QueueBatchConfig]()
		cp.RetryConfig.Enabled = false
		return &cp
	}
	return cfg
}
