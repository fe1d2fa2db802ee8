package config

import (
	"crypto/tls"
	"errors"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"

	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// defaults is what WithDefaults gives a zero Config: the documented values,
// written out rather than taken from the constants.
func defaults() *Config {
	return &Config{
		DefaultQueue:    "machinery_tasks",
		ResultsExpireIn: 3600,
		AMQP:            &AMQPConfig{},
		Redis: &RedisConfig{
			KeyPrefix:              "machinist",
			NormalTasksPollPeriod:  1000,
			DelayedTasksPollPeriod: 20,
			DelayedTasksKey:        "delayed_tasks",
		},
		LeaseDuration:         10 * time.Second,
		LeaseRenewInterval:    2500 * time.Millisecond,
		RecoverInterval:       time.Second,
		MaxRecoveries:         3,
		ShutdownTimeout:       30 * time.Second,
		UnregisteredTaskTries: 10,
		UnregisteredTaskDelay: 5 * time.Second,
		ArchiveMaxSize:        10000,
		ArchiveMaxAge:         90 * 24 * time.Hour,

		AggregationMaxSize:     100,
		AggregationMaxDelay:    time.Minute,
		AggregationGracePeriod: 5 * time.Second,
		AggregatorRetries:      3,
		AggregatorTimeout:      time.Minute,
		MaxMessageSize:         16 << 20,
	}
}

// fullConfig returns a Config with every exported field set to a value that
// is not its default.
func fullConfig() *Config {
	return &Config{
		Broker:                  "redis://:pw@localhost:6379/1",
		Lock:                    "eager",
		MultipleBrokerSeparator: ",",
		DefaultQueue:            "q",
		ResultBackend:           "redis://:pw@localhost:6379/2",
		ResultsExpireIn:         60,
		AMQP: &AMQPConfig{
			Exchange: "e", ExchangeType: "topic",
			QueueDeclareArgs: QueueDeclareArgs{"x-max-priority": 10},
			QueueBindingArgs: QueueBindingArgs{"x-match": "any"},
			BindingKey:       "k", PrefetchCount: 7, AutoDelete: true, DelayedQueue: "d",
		},
		SQS:       &SQSConfig{Client: "sqs client", WaitTimeSeconds: 2, VisibilityTimeout: new(int)},
		GCPPubSub: &GCPPubSubConfig{Client: "pubsub client", MaxExtension: time.Minute},
		MongoDB:   &MongoDBConfig{Client: "mongo client", Database: "db"},
		DynamoDB:  &DynamoDBConfig{Client: "dynamodb client", TaskStatesTable: "s", GroupMetasTable: "g"},
		Redis: &RedisConfig{
			MaxIdle: 1, MaxActive: 2, IdleTimeout: 3, Wait: true, ReadTimeout: 4, WriteTimeout: 5,
			ConnectTimeout: 6, NormalTasksPollPeriod: 7, DelayedTasksPollPeriod: 8,
			DelayedTasksKey: "dk", ClientName: "c", MasterName: "m", ClusterMode: true, MinReplicas: 1,
			QueueShards: map[string]int{"q": 2}, KeyPrefix: "p", CACertFile: "ca.pem",
		},
		TLSConfig:             &tls.Config{ServerName: "redis.example"},
		NoUnixSignals:         true,
		LeaseDuration:         20 * time.Second,
		LeaseRenewInterval:    time.Second,
		RecoverInterval:       2 * time.Second,
		MaxRecoveries:         -1,
		ShutdownTimeout:       time.Minute,
		UnregisteredTaskTries: 2,
		UnregisteredTaskDelay: time.Second,
		ArchiveMaxSize:        5,
		ArchiveMaxAge:         time.Hour,
		CompletedRetention:    time.Minute,

		AggregationMaxSize:     7,
		AggregationMaxDelay:    2 * time.Minute,
		AggregationGracePeriod: 3 * time.Second,
		AggregatorRetries:      1,
		AggregatorTimeout:      2 * time.Second,
		MaxMessageSize:         -1,
		MachineryBroker:        "redis://legacy:6379",
		MachineryResultBackend: "redis://legacy:6379/3",
		Logger:                 slog.Default(),
		TracerProvider:         tracenoop.NewTracerProvider(),
		MeterProvider:          metricnoop.NewMeterProvider(),
		Propagator:             propagation.TraceContext{},
	}
}

func TestWithDefaultsSetsEveryDefault(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]*Config{"zero": {}, "nil": nil} {
		if got := c.WithDefaults(); !reflect.DeepEqual(got, defaults()) {
			t.Errorf("%s.WithDefaults() =\n%+v\nwant\n%+v", name, got, defaults())
		}
	}
}

func TestWithDefaultsDerivesFromSetFields(t *testing.T) {
	t.Parallel()
	got := (&Config{Broker: "redis://localhost:6379", LeaseDuration: 20 * time.Second}).WithDefaults()
	if got.ResultBackend != "redis://localhost:6379" {
		t.Errorf("ResultBackend = %q, want the Broker", got.ResultBackend)
	}
	if got.LeaseRenewInterval != 5*time.Second {
		t.Errorf("LeaseRenewInterval = %s, want LeaseDuration/4 = 5s", got.LeaseRenewInterval)
	}
}

// The loaders' starting point and WithDefaults agree: a loaded Config and a
// hand-built one end up the same.
func TestWithDefaultsAgreesWithLoaderDefaults(t *testing.T) {
	t.Parallel()
	if got := defaultConfig().WithDefaults(); !reflect.DeepEqual(got, defaults()) {
		t.Errorf("defaultConfig().WithDefaults() =\n%+v\nwant\n%+v", got, defaults())
	}
}

func TestWithDefaultsKeepsEverySetField(t *testing.T) {
	t.Parallel()
	in := fullConfig()
	checkAllSet(t, reflect.ValueOf(in), "", nil)
	got := in.WithDefaults()
	if !reflect.DeepEqual(got, fullConfig()) {
		t.Errorf("WithDefaults() =\n%+v\nwant every field kept:\n%+v", got, fullConfig())
	}
}

func TestWithDefaultsDoesNotMutateOrShare(t *testing.T) {
	t.Parallel()
	in := &Config{Redis: &RedisConfig{MaxIdle: 5}, AMQP: &AMQPConfig{QueueBindingArgs: QueueBindingArgs{"a": "1"}}}
	out := in.WithDefaults()

	want := &Config{Redis: &RedisConfig{MaxIdle: 5}, AMQP: &AMQPConfig{QueueBindingArgs: QueueBindingArgs{"a": "1"}}}
	if !reflect.DeepEqual(in, want) {
		t.Fatalf("WithDefaults changed its receiver: %+v, Redis %+v", in, in.Redis)
	}
	if out.Redis == in.Redis || out.AMQP == in.AMQP {
		t.Fatal("WithDefaults shares a sub-config with its receiver")
	}
	out.Redis.MaxIdle = 99
	out.AMQP.QueueBindingArgs["a"] = "changed"
	if in.Redis.MaxIdle != 5 || in.AMQP.QueueBindingArgs["a"] != "1" {
		t.Error("writing to the copy's sub-configs changed the original's")
	}

	a, b := (&Config{}).WithDefaults(), (&Config{}).WithDefaults()
	if a.Redis == b.Redis || a.AMQP == b.AMQP {
		t.Error("two WithDefaults calls share a sub-config")
	}
}

func TestValidateAccepts(t *testing.T) {
	t.Parallel()
	for _, u := range []string{
		"memory://", "memory://name", "eager", "redis://", "rediss://",
		"redis://localhost:6379/0", "redis://user:secret@host:6379", "rediss://:secret@host:6380/1",
	} {
		for _, field := range []string{"Broker", "ResultBackend"} {
			c := &Config{Broker: "memory://"}
			reflect.ValueOf(c).Elem().FieldByName(field).SetString(u)
			if err := c.WithDefaults().Validate(); err != nil {
				t.Errorf("%s %q: Validate() = %v, want nil", field, u, err)
			}
		}
	}
	if err := fullConfig().Validate(); err != nil {
		t.Errorf("fullConfig().Validate() = %v", err)
	}
}

// An unset Broker (an environment variable not set, a YAML file without
// the key) is refused with an error that names it as the user set it and
// says what to set, whatever else is set.
func TestValidateRefusesAnUnsetBroker(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]*Config{
		"zero":                  {},
		"result backend only":   {ResultBackend: "redis://localhost:6379"},
		"everything but Broker": func() *Config { c := fullConfig(); c.Broker = ""; return c }(),
	} {
		err := c.WithDefaults().Validate()
		if !errors.Is(err, ErrInvalid) {
			t.Fatalf("%s: Validate() = %v, want an error wrapping ErrInvalid", name, err)
		}
		for _, want := range []string{"Broker", "BROKER", "broker", `"memory://"`, `"redis://host:port"`} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: Validate() = %q, want it to name %s", name, err, want)
			}
		}
	}
}

func TestValidateRefuses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		field  string
		value  string // as the error must show it
		modify func(*Config)
	}{
		{"Broker", `"amqp://***@localhost:5672/"`, func(c *Config) { c.Broker = "amqp://guest@localhost:5672/" }},
		{"Broker", `"memory://a/b"`, func(c *Config) { c.Broker = "memory://a/b" }},
		{"ResultBackend", `"mongodb://localhost"`, func(c *Config) { c.ResultBackend = "mongodb://localhost" }},
		{"DefaultQueue", `"  "`, func(c *Config) { c.DefaultQueue = "  " }},
		{"DefaultQueue", `"a{b"`, func(c *Config) { c.DefaultQueue = "a{b" }},
		{"DefaultQueue", `"a}"`, func(c *Config) { c.DefaultQueue = "a}" }},
		{"ResultsExpireIn", "-1", func(c *Config) { c.ResultsExpireIn = -1 }},
		{"LeaseDuration", "500ms", func(c *Config) { c.LeaseDuration = 500 * time.Millisecond }},
		{"LeaseRenewInterval", "10s", func(c *Config) { c.LeaseRenewInterval = c.LeaseDuration }},
		{"LeaseRenewInterval", "-1s", func(c *Config) { c.LeaseRenewInterval = -time.Second }},
		{"RecoverInterval", "0s", func(c *Config) { c.RecoverInterval = 0 }},
		{"ShutdownTimeout", "-1s", func(c *Config) { c.ShutdownTimeout = -time.Second }},
		{"AggregatorTimeout", "-1s", func(c *Config) { c.AggregatorTimeout = -time.Second }},
		{"UnregisteredTaskTries", "-1", func(c *Config) { c.UnregisteredTaskTries = -1 }},
		{"UnregisteredTaskDelay", "-1s", func(c *Config) { c.UnregisteredTaskDelay = -time.Second }},
		{"ArchiveMaxSize", "-1", func(c *Config) { c.ArchiveMaxSize = -1 }},
		{"ArchiveMaxAge", "-1h0m0s", func(c *Config) { c.ArchiveMaxAge = -time.Hour }},
		{"Redis.MaxIdle", "-1", func(c *Config) { c.Redis.MaxIdle = -1 }},
		{"Redis.MaxActive", "-2", func(c *Config) { c.Redis.MaxActive = -2 }},
		{"Redis.IdleTimeout", "-3", func(c *Config) { c.Redis.IdleTimeout = -3 }},
		{"Redis.ReadTimeout", "-4", func(c *Config) { c.Redis.ReadTimeout = -4 }},
		{"Redis.WriteTimeout", "-5", func(c *Config) { c.Redis.WriteTimeout = -5 }},
		{"Redis.ConnectTimeout", "-6", func(c *Config) { c.Redis.ConnectTimeout = -6 }},
		{"Redis.NormalTasksPollPeriod", "-7", func(c *Config) { c.Redis.NormalTasksPollPeriod = -7 }},
		{"Redis.DelayedTasksPollPeriod", "-8", func(c *Config) { c.Redis.DelayedTasksPollPeriod = -8 }},
		{"Redis.MinReplicas", "-1", func(c *Config) { c.Redis.MinReplicas = -1 }},
		{"Redis.QueueShards", "q:0", func(c *Config) { c.Redis.QueueShards = map[string]int{"q": 0} }},
		{"Redis.QueueShards", "q:65", func(c *Config) { c.Redis.QueueShards = map[string]int{"q": 65} }},
		{"Redis.QueueShards", `"q{1"`, func(c *Config) { c.Redis.QueueShards = map[string]int{"q{1": 2} }},
		{"Redis.QueueShards", `""`, func(c *Config) { c.Redis.QueueShards = map[string]int{"": 2} }},
		{"Redis.KeyPrefix", `"{app}"`, func(c *Config) { c.Redis.KeyPrefix = "{app}" }},
		{"Redis.KeyPrefix", `"my app"`, func(c *Config) { c.Redis.KeyPrefix = "my app" }},
	}
	for _, tt := range tests {
		t.Run(tt.field+"="+tt.value, func(t *testing.T) {
			t.Parallel()
			c := (&Config{Broker: "memory://"}).WithDefaults()
			tt.modify(c)
			err := c.Validate()
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("Validate() = %v, want an error wrapping ErrInvalid", err)
			}
			if want := tt.field + " = " + tt.value + ":"; !strings.Contains(err.Error(), want) {
				t.Errorf("Validate() = %q, want it to contain %q", err, want)
			}
		})
	}
}

func TestValidateNil(t *testing.T) {
	t.Parallel()
	if err := (*Config)(nil).Validate(); !errors.Is(err, ErrInvalid) {
		t.Errorf("nil.Validate() = %v, want ErrInvalid", err)
	}
}

// A URL of one of machinery's other brokers or backends is refused by
// name.
func TestValidateNamesMachineryServicesItDoesNotHave(t *testing.T) {
	t.Parallel()
	for u, name := range map[string]string{
		"amqp://guest:guest@localhost:5672/":                 "AMQP (RabbitMQ)",
		"https://sqs.us-east-1.amazonaws.com/123456789012/q": "Amazon SQS",
		"gcppubsub://project/subscription":                   "Google Cloud Pub/Sub",
		"mongodb://user:secret@localhost:27017/db":           "MongoDB",
		"mongodb+srv://cluster0.example.net":                 "MongoDB",
		"https://dynamodb.us-east-1.amazonaws.com":           "Amazon DynamoDB",
		"memcache://10.0.0.1:11211,10.0.0.2:11211":           "Memcache",
	} {
		c := (&Config{Broker: u}).WithDefaults()
		err := c.Validate()
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), name+" is one of machinery's") {
			t.Errorf("Broker %q: Validate() = %v, want ErrInvalid naming %s", u, err, name)
		}
		if err != nil && strings.Contains(err.Error(), "secret") {
			t.Errorf("Broker %q: the error shows the password: %v", u, err)
		}
	}
}

func TestValidateNeverShowsPassword(t *testing.T) {
	t.Parallel()
	for _, u := range []string{
		"amqp://user:secret@host:5672/",
		"user:secret@host:6379",          // no scheme
		"redis:/user:secret@host:6379",   // a slash short
		"memory://user:secret@name/path", // memory URL with a path
		"kafka://user:p@ss:secret@host",  // "@" in the password
		"se:cret@host://x",               // not a scheme
	} {
		for _, field := range []string{"Broker", "ResultBackend"} {
			c := (&Config{Broker: "memory://"}).WithDefaults()
			reflect.ValueOf(c).Elem().FieldByName(field).SetString(u)
			err := c.Validate()
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("%s %q: Validate() = %v, want ErrInvalid", field, u, err)
			}
			if msg := err.Error(); strings.Contains(msg, "secret") || !strings.Contains(msg, field+` = "`) || !strings.Contains(msg, "***@") {
				t.Errorf("%s %q: Validate() = %q, want the field named and the credentials hidden", field, u, msg)
			}
		}
	}
}

func TestRedactURL(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"redis://user:secret@host:6379/0":   "redis://***@host:6379/0",
		"rediss://:secret@host:6380":        "rediss://***@host:6380",
		"redis://u:a://b@c@host":            "redis://***@host",
		"redis://host:6379":                 "redis://host:6379",
		"memory://":                         "memory://",
		"eager":                             "eager",
		"user:secret@host":                  "***@host",
		"se:cret://x@host":                  "***@host",
		"redis+sentinel://u:secret@h1,h2/0": "redis+sentinel://***@h1,h2/0",
	} {
		if got := RedactURL(in); got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", in, got, want)
		}
	}
}
