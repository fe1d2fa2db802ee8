package config

import (
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/b6192125/machinist/internal/redact"
)

// WithDefaults returns a copy of c with every field left zero set to its
// default. c itself is not changed; a nil c gives the defaults. Broker has
// no default: an unset one stays empty, and Validate refuses it.
func (c *Config) WithDefaults() *Config {
	out := &Config{}
	if c != nil {
		*out = c.copyFields()
	}
	if out.ResultBackend == "" {
		out.ResultBackend = out.Broker
	}
	if out.MachineryResultBackend == "" {
		out.MachineryResultBackend = out.MachineryBroker
	}
	if out.DefaultQueue == "" {
		out.DefaultQueue = DefaultQueueName
	}
	if out.ResultsExpireIn == 0 {
		out.ResultsExpireIn = DefaultResultsExpireIn
	}
	// copyFields already copied the sub-configs; only allocate the missing.
	if out.Redis == nil {
		out.Redis = &RedisConfig{}
	}
	if out.AMQP == nil {
		out.AMQP = &AMQPConfig{}
	}
	if out.Redis.KeyPrefix == "" {
		out.Redis.KeyPrefix = DefaultRedisKeyPrefix
	}
	if out.Redis.NormalTasksPollPeriod == 0 {
		out.Redis.NormalTasksPollPeriod = DefaultNormalTasksPollPeriod
	}
	if out.Redis.DelayedTasksPollPeriod == 0 {
		out.Redis.DelayedTasksPollPeriod = DefaultDelayedTasksPollPeriod
	}
	if out.Redis.DelayedTasksKey == "" {
		out.Redis.DelayedTasksKey = DefaultDelayedTasksKey
	}
	if out.LeaseDuration == 0 {
		out.LeaseDuration = DefaultLeaseDuration
	}
	if out.LeaseRenewInterval == 0 {
		out.LeaseRenewInterval = out.LeaseDuration / 4
	}
	if out.RecoverInterval == 0 {
		out.RecoverInterval = DefaultRecoverInterval
	}
	if out.MaxRecoveries == 0 {
		out.MaxRecoveries = DefaultMaxRecoveries
	}
	if out.ShutdownTimeout == 0 {
		out.ShutdownTimeout = DefaultShutdownTimeout
	}
	if out.UnregisteredTaskTries == 0 {
		out.UnregisteredTaskTries = DefaultUnregisteredTaskTries
	}
	if out.UnregisteredTaskDelay == 0 {
		out.UnregisteredTaskDelay = DefaultUnregisteredTaskDelay
	}
	if out.ArchiveMaxSize == 0 {
		out.ArchiveMaxSize = DefaultArchiveMaxSize
	}
	if out.ArchiveMaxAge == 0 {
		out.ArchiveMaxAge = DefaultArchiveMaxAge
	}
	if out.AggregationMaxSize == 0 {
		out.AggregationMaxSize = DefaultAggregationMaxSize
	}
	if out.AggregationMaxDelay == 0 {
		out.AggregationMaxDelay = DefaultAggregationMaxDelay
	}
	if out.AggregationGracePeriod == 0 {
		out.AggregationGracePeriod = DefaultAggregationGracePeriod
	}
	if out.AggregatorRetries == 0 {
		out.AggregatorRetries = DefaultAggregatorRetries
	}
	if out.AggregatorTimeout == 0 {
		out.AggregatorTimeout = DefaultAggregatorTimeout
	}
	if out.MaxMessageSize == 0 {
		out.MaxMessageSize = DefaultMaxMessageSize
	}
	return out
}

// copyFields returns a copy of c's exported fields, with the sub-configs
// (and the maps inside them) copied rather than shared. It names each field
// so that the unexported ones, the reloader above all, are never copied: a
// copy is a plain Config that does not follow the file it came from.
// TLSConfig, Logger and the OpenTelemetry providers are shared: they are
// used, never written.
func (c *Config) copyFields() Config {
	out := Config{
		Broker:                  c.Broker,
		Lock:                    c.Lock,
		MultipleBrokerSeparator: c.MultipleBrokerSeparator,
		DefaultQueue:            c.DefaultQueue,
		ResultBackend:           c.ResultBackend,
		ResultsExpireIn:         c.ResultsExpireIn,
		TLSConfig:               c.TLSConfig,
		SQS:                     c.SQS,
		GCPPubSub:               c.GCPPubSub,
		MongoDB:                 c.MongoDB,
		DynamoDB:                c.DynamoDB,
		NoUnixSignals:           c.NoUnixSignals,
		LeaseDuration:           c.LeaseDuration,
		LeaseRenewInterval:      c.LeaseRenewInterval,
		RecoverInterval:         c.RecoverInterval,
		MaxRecoveries:           c.MaxRecoveries,
		ShutdownTimeout:         c.ShutdownTimeout,
		UnregisteredTaskTries:   c.UnregisteredTaskTries,
		UnregisteredTaskDelay:   c.UnregisteredTaskDelay,
		ArchiveMaxSize:          c.ArchiveMaxSize,
		ArchiveMaxAge:           c.ArchiveMaxAge,
		CompletedRetention:      c.CompletedRetention,
		AggregationMaxSize:      c.AggregationMaxSize,
		AggregationMaxDelay:     c.AggregationMaxDelay,
		AggregationGracePeriod:  c.AggregationGracePeriod,
		AggregatorRetries:       c.AggregatorRetries,
		AggregatorTimeout:       c.AggregatorTimeout,
		MaxMessageSize:          c.MaxMessageSize,
		MachineryBroker:         c.MachineryBroker,
		MachineryResultBackend:  c.MachineryResultBackend,
		Logger:                  c.Logger,
		TracerProvider:          c.TracerProvider,
		MeterProvider:           c.MeterProvider,
		Propagator:              c.Propagator,
	}
	if c.Redis != nil {
		r := *c.Redis
		out.Redis = &r
	}
	if c.AMQP != nil {
		a := *c.AMQP
		a.QueueDeclareArgs = maps.Clone(a.QueueDeclareArgs)
		a.QueueBindingArgs = maps.Clone(a.QueueBindingArgs)
		out.AMQP = &a
	}
	return out
}

// Validate reports the first field that makes c unusable, naming the field
// and its value (URLs with their credentials hidden). Every error wraps
// ErrInvalid. An unset Broker is refused with an error that says how to
// choose one. Call it on the result of WithDefaults: zero values that mean
// "default" are refused here.
func (c *Config) Validate() error {
	if c == nil {
		return fmt.Errorf("%w: nil *Config", ErrInvalid)
	}
	if c.Broker == "" {
		return errNoBroker
	}
	return c.validateLoaded()
}

// validateLoaded is Validate with an unset Broker (and ResultBackend)
// allowed: what the loaders check, as a program may set the Broker after
// loading; NewServer refuses it then.
func (c *Config) validateLoaded() error {
	bad := func(field string, value interface{}, why string) error {
		return fmt.Errorf("%w: %s = %v: %s", ErrInvalid, field, value, why)
	}
	if c.Broker != "" {
		if err := validateURL(c.Broker); err != nil {
			return bad("Broker", fmt.Sprintf("%q", redact.URL(c.Broker)), err.Error())
		}
	}
	if c.ResultBackend != "" || c.Broker != "" {
		if err := validateURL(c.ResultBackend); err != nil {
			return bad("ResultBackend", fmt.Sprintf("%q", redact.URL(c.ResultBackend)), err.Error())
		}
	}
	return c.ValidateSettings()
}

// ValidateSettings is Validate without the Broker and ResultBackend URLs:
// for a Server on a broker and backend the caller made
// (NewServerWithBrokerBackend), where the URLs name nothing.
func (c *Config) ValidateSettings() error {
	bad := func(field string, value interface{}, why string) error {
		return fmt.Errorf("%w: %s = %v: %s", ErrInvalid, field, value, why)
	}
	if c == nil {
		return fmt.Errorf("%w: nil *Config", ErrInvalid)
	}
	if strings.TrimSpace(c.DefaultQueue) == "" {
		return bad("DefaultQueue", fmt.Sprintf("%q", c.DefaultQueue), "must not be blank")
	}
	if strings.ContainsAny(c.DefaultQueue, "{}") {
		return bad("DefaultQueue", fmt.Sprintf("%q", c.DefaultQueue), "a queue name must not contain braces (they form the Redis Cluster hash tag)")
	}
	for _, m := range []struct{ field, url string }{
		{"MachineryBroker", c.MachineryBroker}, {"MachineryResultBackend", c.MachineryResultBackend},
	} {
		if m.url != "" && !isRedisURL(m.url) {
			return bad(m.field, fmt.Sprintf("%q", redact.URL(m.url)), `machinery's Redis broker and backend are at a "redis://", "rediss://" or "redis+socket://" URL`)
		}
	}
	if c.ResultsExpireIn < 0 {
		return bad("ResultsExpireIn", c.ResultsExpireIn, "must be 0 (default 3600) or a positive number of seconds")
	}
	if c.LeaseDuration < time.Second {
		return bad("LeaseDuration", c.LeaseDuration, "must be at least 1s")
	}
	if c.LeaseRenewInterval <= 0 || c.LeaseRenewInterval >= c.LeaseDuration {
		return bad("LeaseRenewInterval", c.LeaseRenewInterval, fmt.Sprintf("must be positive and less than LeaseDuration (%s)", c.LeaseDuration))
	}
	if c.RecoverInterval <= 0 {
		return bad("RecoverInterval", c.RecoverInterval, "must be positive")
	}
	if c.ShutdownTimeout < 0 {
		return bad("ShutdownTimeout", c.ShutdownTimeout, "must not be negative")
	}
	if c.UnregisteredTaskTries < 0 {
		return bad("UnregisteredTaskTries", c.UnregisteredTaskTries, "must not be negative")
	}
	if c.UnregisteredTaskDelay < 0 {
		return bad("UnregisteredTaskDelay", c.UnregisteredTaskDelay, "must not be negative")
	}
	if c.ArchiveMaxSize < 0 {
		return bad("ArchiveMaxSize", c.ArchiveMaxSize, "must not be negative")
	}
	if c.CompletedRetention < 0 {
		return bad("CompletedRetention", c.CompletedRetention, "must not be negative")
	}
	if c.ArchiveMaxAge < 0 {
		return bad("ArchiveMaxAge", c.ArchiveMaxAge, "must not be negative")
	}
	if c.AggregationMaxSize < 0 || c.AggregationMaxSize == 1 {
		return bad("AggregationMaxSize", c.AggregationMaxSize, "must be 0 (default 100) or at least 2")
	}
	if c.AggregationMaxDelay < 0 {
		return bad("AggregationMaxDelay", c.AggregationMaxDelay, "must not be negative")
	}
	if c.AggregationGracePeriod < 0 {
		return bad("AggregationGracePeriod", c.AggregationGracePeriod, "must not be negative")
	}
	if c.AggregatorRetries < 0 {
		return bad("AggregatorRetries", c.AggregatorRetries, "must not be negative")
	}
	if c.AggregatorTimeout < 0 {
		return bad("AggregatorTimeout", c.AggregatorTimeout, "must not be negative")
	}
	if c.Redis != nil {
		r := c.Redis
		for _, f := range []struct {
			name string
			v    int
		}{
			{"Redis.MaxIdle", r.MaxIdle}, {"Redis.MaxActive", r.MaxActive}, {"Redis.IdleTimeout", r.IdleTimeout},
			{"Redis.ReadTimeout", r.ReadTimeout}, {"Redis.WriteTimeout", r.WriteTimeout},
			{"Redis.ConnectTimeout", r.ConnectTimeout},
			{"Redis.NormalTasksPollPeriod", r.NormalTasksPollPeriod},
			{"Redis.DelayedTasksPollPeriod", r.DelayedTasksPollPeriod},
			{"Redis.MinReplicas", r.MinReplicas},
		} {
			if f.v < 0 {
				return bad(f.name, f.v, "must not be negative")
			}
		}
		for q, n := range r.QueueShards {
			switch {
			case q == "" || strings.ContainsAny(q, "{}"):
				return bad("Redis.QueueShards", fmt.Sprintf("%q", q), "queue names must be set and hold no braces")
			case n < 1 || n > MaxQueueShards:
				return bad("Redis.QueueShards", fmt.Sprintf("%s:%d", q, n), fmt.Sprintf("counts must be from 1 to %d", MaxQueueShards))
			}
		}
		if strings.ContainsAny(r.KeyPrefix, "{} ") {
			return bad("Redis.KeyPrefix", fmt.Sprintf("%q", r.KeyPrefix), "must not contain braces or spaces")
		}
	}
	return nil
}

// validateURL accepts the broker and backend URLs machinist knows.
func validateURL(u string) error {
	switch {
	case u == "eager":
		return nil
	case strings.HasPrefix(u, "memory://"):
		if strings.ContainsAny(strings.TrimPrefix(u, "memory://"), "/?#") {
			return errors.New(`a memory URL is "memory://" or "memory://NAME"`)
		}
		return nil
	case isRedisURL(u):
		return nil
	case u == "":
		return errors.New("must not be empty")
	case unsupported(u) != "":
		return fmt.Errorf(`%s is one of machinery's brokers or backends that machinist does not have: use "redis://" (or "memory://" within one process)`, unsupported(u))
	default:
		return errors.New(`unsupported scheme: want "memory://", "eager", "redis://", "rediss://" or "redis+socket://"`)
	}
}

func isRedisURL(u string) bool {
	return strings.HasPrefix(u, "redis://") || strings.HasPrefix(u, "rediss://") || strings.HasPrefix(u, "redis+socket://")
}

// unsupported names the service of one of machinery's URLs that machinist
// does not support, or returns "".
func unsupported(u string) string {
	lower := strings.ToLower(u)
	for _, s := range []struct{ prefix, name string }{
		{"amqp://", "AMQP (RabbitMQ)"}, {"amqps://", "AMQP (RabbitMQ)"},
		{"gcppubsub://", "Google Cloud Pub/Sub"},
		{"mongodb://", "MongoDB"}, {"mongodb+srv://", "MongoDB"},
		{"memcache://", "Memcache"},
		{"https://sqs", "Amazon SQS"}, {"http://sqs", "Amazon SQS"},
		{"https://dynamodb", "Amazon DynamoDB"}, {"http://dynamodb", "Amazon DynamoDB"},
	} {
		if strings.HasPrefix(lower, s.prefix) {
			return s.name
		}
	}
	return ""
}

// RedactURL returns u with its user name and password replaced by "***".
//
// Everything before the last "@" goes, except a well-formed scheme: a
// password may itself hold "@", "/" or "://", and a string that is not a
// URL at all ("user:secret@host") is redacted too.
func RedactURL(u string) string { return redact.URL(u) }
