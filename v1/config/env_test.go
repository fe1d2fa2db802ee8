package config

import (
	"crypto/tls"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/kelseyhightower/envconfig"
)

// These tests set environment variables, so none of them is parallel.

func TestNewFromEnvironmentStartsFromTheLoaderDefaults(t *testing.T) {
	clearEnv(t)
	got, err := NewFromEnvironment()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, defaultConfig()) {
		t.Errorf("NewFromEnvironment() = %+v, want the loader defaults %+v", got, defaultConfig())
	}
	again, err := NewFromEnvironment()
	if err != nil {
		t.Fatal(err)
	}
	if got.Redis == again.Redis || got.AMQP == again.AMQP {
		t.Error("two loads share a sub-config")
	}
}

// BROKER unset loads, so that a program may still set Broker in code, and
// leaves Broker empty for NewServer to refuse: nothing chooses the
// in-process broker behind the program's back.
func TestNewFromEnvironmentLeavesAnUnsetBrokerToNewServer(t *testing.T) {
	clearEnv(t)
	t.Setenv("DEFAULT_QUEUE", "jobs")
	got, err := NewFromEnvironment()
	if err != nil {
		t.Fatalf("NewFromEnvironment() with BROKER unset = %v, want it to load", err)
	}
	if got.Broker != "" || got.WithDefaults().ResultBackend != "" {
		t.Errorf("Broker = %q, ResultBackend with defaults = %q; want both empty", got.Broker, got.WithDefaults().ResultBackend)
	}
	if err := got.WithDefaults().Validate(); !errors.Is(err, errNoBroker) {
		t.Errorf("Validate() = %v, want %v", err, errNoBroker)
	}
}

// Every name machinery documents, and machinist's, set at once; each must
// reach its field.
func TestNewFromEnvironmentReadsEveryName(t *testing.T) {
	clearEnv(t)
	tests := []struct {
		name, value string
		got         func(*Config) any
		want        any
	}{
		// machinery's names.
		{"BROKER", "redis://:pw@localhost:6379/1", func(c *Config) any { return c.Broker }, "redis://:pw@localhost:6379/1"},
		{"LOCK", "eager", func(c *Config) any { return c.Lock }, "eager"},
		{"MULTIPLE_BROKEN_SEPARATOR", ";", func(c *Config) any { return c.MultipleBrokerSeparator }, ";"},
		{"DEFAULT_QUEUE", "env_queue", func(c *Config) any { return c.DefaultQueue }, "env_queue"},
		{"RESULT_BACKEND", "redis://:pw@localhost:6379/2", func(c *Config) any { return c.ResultBackend }, "redis://:pw@localhost:6379/2"},
		{"RESULTS_EXPIRE_IN", "7200", func(c *Config) any { return c.ResultsExpireIn }, 7200},
		{"NO_UNIX_SIGNALS", "true", func(c *Config) any { return c.NoUnixSignals }, true},
		{"REDIS_MAX_IDLE", "12", func(c *Config) any { return c.Redis.MaxIdle }, 12},
		{"REDIS_MAX_ACTIVE", "123", func(c *Config) any { return c.Redis.MaxActive }, 123},
		{"REDIS_IDLE_TIMEOUT", "456", func(c *Config) any { return c.Redis.IdleTimeout }, 456},
		{"REDIS_WAIT", "true", func(c *Config) any { return c.Redis.Wait }, true},
		{"REDIS_READ_TIMEOUT", "17", func(c *Config) any { return c.Redis.ReadTimeout }, 17},
		{"REDIS_WRITE_TIMEOUT", "19", func(c *Config) any { return c.Redis.WriteTimeout }, 19},
		{"REDIS_CONNECT_TIMEOUT", "21", func(c *Config) any { return c.Redis.ConnectTimeout }, 21},
		{"REDIS_NORMAL_TASKS_POLL_PERIOD", "1001", func(c *Config) any { return c.Redis.NormalTasksPollPeriod }, 1001},
		{"REDIS_DELAYED_TASKS_POLL_PERIOD", "23", func(c *Config) any { return c.Redis.DelayedTasksPollPeriod }, 23},
		{"REDIS_DELAYED_TASKS_KEY", "dk", func(c *Config) any { return c.Redis.DelayedTasksKey }, "dk"},
		{"REDIS_CLIENT_NAME", "client", func(c *Config) any { return c.Redis.ClientName }, "client"},
		{"REDIS_MASTER_NAME", "master", func(c *Config) any { return c.Redis.MasterName }, "master"},
		{"REDIS_CLUSTER_MODE", "true", func(c *Config) any { return c.Redis.ClusterMode }, true},
		{"REDIS_MIN_REPLICAS", "1", func(c *Config) any { return c.Redis.MinReplicas }, 1},
		{"REDIS_QUEUE_SHARDS", "busy:3,other:2", func(c *Config) any { return c.Redis.QueueShards }, map[string]int{"busy": 3, "other": 2}},
		{"AMQP_EXCHANGE", "exchange", func(c *Config) any { return c.AMQP.Exchange }, "exchange"},
		{"AMQP_EXCHANGE_TYPE", "topic", func(c *Config) any { return c.AMQP.ExchangeType }, "topic"},
		{"AMQP_QUEUE_DECLARE_ARGS", "x-max-priority:10", func(c *Config) any { return c.AMQP.QueueDeclareArgs }, QueueDeclareArgs{"x-max-priority": "10"}},
		{"AMQP_QUEUE_BINDING_ARGS", "image-type:png,x-match:any", func(c *Config) any { return c.AMQP.QueueBindingArgs }, QueueBindingArgs{"image-type": "png", "x-match": "any"}},
		{"AMQP_BINDING_KEY", "bk", func(c *Config) any { return c.AMQP.BindingKey }, "bk"},
		{"AMQP_PREFETCH_COUNT", "7", func(c *Config) any { return c.AMQP.PrefetchCount }, 7},
		{"AMQP_AUTO_DELETE", "true", func(c *Config) any { return c.AMQP.AutoDelete }, true},
		{"AMQP_DELAYED_QUEUE", "dq", func(c *Config) any { return c.AMQP.DelayedQueue }, "dq"},
		// machinist's.
		{"LEASE_DURATION", "15s", func(c *Config) any { return c.LeaseDuration }, 15 * time.Second},
		{"LEASE_RENEW_INTERVAL", "3s", func(c *Config) any { return c.LeaseRenewInterval }, 3 * time.Second},
		{"RECOVER_INTERVAL", "2s", func(c *Config) any { return c.RecoverInterval }, 2 * time.Second},
		{"MAX_RECOVERIES", "5", func(c *Config) any { return c.MaxRecoveries }, 5},
		{"SHUTDOWN_TIMEOUT", "1m", func(c *Config) any { return c.ShutdownTimeout }, time.Minute},
		{"UNREGISTERED_TASK_TRIES", "4", func(c *Config) any { return c.UnregisteredTaskTries }, 4},
		{"UNREGISTERED_TASK_DELAY", "1500ms", func(c *Config) any { return c.UnregisteredTaskDelay }, 1500 * time.Millisecond},
		{"ARCHIVE_MAX_SIZE", "500", func(c *Config) any { return c.ArchiveMaxSize }, 500},
		{"ARCHIVE_MAX_AGE", "168h", func(c *Config) any { return c.ArchiveMaxAge }, 168 * time.Hour},
		{"COMPLETED_RETENTION", "30m", func(c *Config) any { return c.CompletedRetention }, 30 * time.Minute},
		{"AGGREGATION_MAX_SIZE", "50", func(c *Config) any { return c.AggregationMaxSize }, 50},
		{"AGGREGATION_MAX_DELAY", "2m", func(c *Config) any { return c.AggregationMaxDelay }, 2 * time.Minute},
		{"AGGREGATION_GRACE_PERIOD", "10s", func(c *Config) any { return c.AggregationGracePeriod }, 10 * time.Second},
		{"AGGREGATOR_RETRIES", "5", func(c *Config) any { return c.AggregatorRetries }, 5},
		{"AGGREGATOR_TIMEOUT", "30s", func(c *Config) any { return c.AggregatorTimeout }, 30 * time.Second},
		{"MAX_MESSAGE_SIZE", "1048576", func(c *Config) any { return c.MaxMessageSize }, 1048576},
		{"MACHINERY_BROKER", "redis://legacy:6379", func(c *Config) any { return c.MachineryBroker }, "redis://legacy:6379"},
		{"MACHINERY_RESULT_BACKEND", "redis://legacy:6379/2", func(c *Config) any { return c.MachineryResultBackend }, "redis://legacy:6379/2"},
		{"REDIS_KEY_PREFIX", "envapp", func(c *Config) any { return c.Redis.KeyPrefix }, "envapp"},
		{"REDIS_CA_CERT_FILE", "/etc/ca.pem", func(c *Config) any { return c.Redis.CACertFile }, "/etc/ca.pem"},
	}
	for _, tt := range tests {
		t.Setenv(tt.name, tt.value)
	}
	got, err := NewFromEnvironment()
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		if v := tt.got(got); !reflect.DeepEqual(v, tt.want) {
			t.Errorf("%s=%s: field = %#v, want %#v", tt.name, tt.value, v, tt.want)
		}
	}
	// The table covers every name the tags define.
	covered := map[string]bool{}
	for _, tt := range tests {
		covered[tt.name] = true
	}
	for _, n := range envNames(t) {
		if !covered[n.plain] {
			t.Errorf("%s is not tested", n.plain)
		}
	}
}

// envconfig looks a nested field up as <SECTION>_<NAME> before <NAME>; the
// package documentation says so.
func TestNewFromEnvironmentNestedNameWins(t *testing.T) {
	clearEnv(t)
	t.Setenv("REDIS_MAX_IDLE", "3")
	t.Setenv("REDIS_REDIS_MAX_IDLE", "7")
	t.Setenv("AMQP_AMQP_EXCHANGE", "doubled")
	got, err := NewFromEnvironment()
	if err != nil {
		t.Fatal(err)
	}
	if got.Redis.MaxIdle != 7 || got.AMQP.Exchange != "doubled" {
		t.Errorf("Redis.MaxIdle = %d, AMQP.Exchange = %q; want 7 and %q", got.Redis.MaxIdle, got.AMQP.Exchange, "doubled")
	}
}

// machinery's NewFromEnvironment returned a non-nil, empty TLSConfig, and its
// Redis connector enabled TLS whenever TLSConfig != nil (issue #517).
func TestNewFromEnvironmentNeverSetsTLSConfig(t *testing.T) {
	clearEnv(t)
	// The hazard: envconfig allocates a nil *tls.Config it walks.
	var machineryLike struct {
		Broker    string `envconfig:"BROKER"`
		TLSConfig *tls.Config
	}
	if err := envconfig.Process("", &machineryLike); err != nil {
		t.Fatal(err)
	}
	if machineryLike.TLSConfig == nil {
		t.Fatal("envconfig no longer allocates a nil *tls.Config; this test no longer shows the hazard")
	}

	for _, env := range [][2]string{
		{"BROKER", "redis://localhost:6379"},
		// Names envconfig would give a TLSConfig field, without and with
		// the nested prefix.
		{"TLSCONFIG_INSECURESKIPVERIFY", "true"},
		{"INSECURESKIPVERIFY", "true"},
		{"SERVERNAME", "evil.example"},
		{"TLSCONFIG", "on"},
	} {
		t.Setenv(env[0], env[1])
	}
	got, err := NewFromEnvironment()
	if err != nil {
		t.Fatal(err)
	}
	if got.TLSConfig != nil {
		t.Errorf("NewFromEnvironment() TLSConfig = %+v, want nil: a plain redis:// broker must not use TLS", got.TLSConfig)
	}
	if got.WithDefaults().TLSConfig != nil {
		t.Error("WithDefaults set a TLSConfig")
	}
	if got.Logger != nil {
		t.Errorf("NewFromEnvironment() Logger = %v, want nil", got.Logger)
	}
}

func TestNewFromEnvironmentRefuses(t *testing.T) {
	tests := []struct {
		name, value string
		want        string
		invalid     bool // the error wraps ErrInvalid
	}{
		{"REDIS_MAX_IDLE", "many", "REDIS_MAX_IDLE", false},
		{"LEASE_DURATION", "15", "LEASE_DURATION", false},
		{"NO_UNIX_SIGNALS", "perhaps", "NO_UNIX_SIGNALS", false},
		{"AMQP_QUEUE_BINDING_ARGS", "novalue", "AMQP_QUEUE_BINDING_ARGS", false},
		{"BROKER", "amqp://guest:secret@localhost:5672/", `Broker = "amqp://***@localhost:5672/"`, true},
		{"LEASE_DURATION", "100ms", "LeaseDuration = 100ms", true},
	}
	for _, tt := range tests {
		t.Run(tt.name+"="+tt.value, func(t *testing.T) {
			clearEnv(t)
			t.Setenv(tt.name, tt.value)
			cnf, err := NewFromEnvironment()
			if err == nil {
				t.Fatalf("NewFromEnvironment() = %+v, want an error", cnf)
			}
			msg := err.Error()
			if !strings.Contains(msg, tt.want) || !strings.Contains(msg, "environment") {
				t.Errorf("error %q does not contain %q", msg, tt.want)
			}
			if strings.Contains(msg, "secret") {
				t.Errorf("error %q shows a password", msg)
			}
			if tt.invalid && !errors.Is(err, ErrInvalid) {
				t.Errorf("error %q does not wrap ErrInvalid", msg)
			}
		})
	}
}
