// Package config holds machinist's configuration: machinery's Config and
// RedisConfig, with the same YAML keys and environment names, plus the
// settings machinist adds (leases, shutdown, dead letters, unregistered
// tasks).
//
// # Getting a Config
//
// NewFromYaml reads a YAML file whose keys are the yaml tags of the fields:
//
//	broker: redis://:password@localhost:6379/0
//	default_queue: emails
//	lease_duration: 15s
//	redis:
//	  key_prefix: myapp
//
// The whole file is read (machinery cut it at 1000 bytes). Durations are
// written as Go durations ("15s", "1m30s"); a bare number is refused rather
// than read as nanoseconds. A key the Config does not have is an error that
// names it, except machinery's sqs and dynamodb sections, which are accepted
// and ignored. tlsconfig is refused: set TLSConfig in code. With
// keepReloading the file is read again every 10 seconds; the Config returned
// never changes, Config.Reloaded gives the latest one, Config.StopReloading
// ends the re-reading.
//
// NewFromEnvironment reads the environment variables listed below, with
// github.com/kelseyhightower/envconfig, and never sets TLSConfig (machinery's
// switched TLS on, its issue #517).
//
// Both loaders start from the loader defaults: DefaultQueue
// "machinery_tasks", ResultsExpireIn 3600, and Redis and AMQP allocated;
// each load gets sub-configs of its own. Broker has no default (machinery's
// was AMQP, which machinist does not have): a file or environment that does
// not set it loads, so that a program can still set it in code, and
// NewServer refuses it. Both refuse, naming the field, what else Validate
// refuses once WithDefaults has filled in the rest. The Config they return
// still has the other fields zero: NewServer fills them in, as WithDefaults
// does for a Config built by hand.
//
// # Defaults
//
// Broker must be set: "memory://" for the in-process broker, a "redis://"
// URL for Redis. WithDefaults sets each other field left zero to its
// default: ResultBackend the same as Broker, DefaultQueue "machinery_tasks",
// ResultsExpireIn 3600 (seconds), LeaseDuration 10s, LeaseRenewInterval
// LeaseDuration/4, RecoverInterval 1s, MaxRecoveries 3, ShutdownTimeout 30s,
// UnregisteredTaskTries 10, UnregisteredTaskDelay 5s, ArchiveMaxSize 10000,
// ArchiveMaxAge 90 days, CompletedRetention 0, AggregationMaxSize 100,
// AggregationMaxDelay 1m, AggregationGracePeriod 5s, AggregatorRetries 3,
// AggregatorTimeout 1m, MaxMessageSize 16 MiB,
// Redis.KeyPrefix "machinist",
// Redis.NormalTasksPollPeriod 1000 (ms) and Redis.DelayedTasksPollPeriod 20
// (ms). The other Redis fields left zero mean go-redis's defaults.
//
// # Environment
//
// Durations are Go durations ("15s"), booleans "true" or "false",
// QueueDeclareArgs and QueueBindingArgs "key:value,key2:value2". A variable
// that is not set keeps the loader default.
//
//	BROKER, RESULT_BACKEND, DEFAULT_QUEUE, RESULTS_EXPIRE_IN, LOCK,
//	NO_UNIX_SIGNALS, MULTIPLE_BROKEN_SEPARATOR (sic, machinery's spelling)
//
//	LEASE_DURATION, LEASE_RENEW_INTERVAL, RECOVER_INTERVAL, MAX_RECOVERIES,
//	SHUTDOWN_TIMEOUT, UNREGISTERED_TASK_TRIES, UNREGISTERED_TASK_DELAY,
//	ARCHIVE_MAX_SIZE, ARCHIVE_MAX_AGE, COMPLETED_RETENTION,
//	AGGREGATION_MAX_SIZE, AGGREGATION_MAX_DELAY, AGGREGATION_GRACE_PERIOD,
//	AGGREGATOR_RETRIES, AGGREGATOR_TIMEOUT, MAX_MESSAGE_SIZE,
//	MACHINERY_BROKER, MACHINERY_RESULT_BACKEND
//
//	REDIS_MAX_IDLE, REDIS_MAX_ACTIVE, REDIS_IDLE_TIMEOUT, REDIS_WAIT,
//	REDIS_READ_TIMEOUT, REDIS_WRITE_TIMEOUT, REDIS_CONNECT_TIMEOUT,
//	REDIS_NORMAL_TASKS_POLL_PERIOD, REDIS_DELAYED_TASKS_POLL_PERIOD,
//	REDIS_DELAYED_TASKS_KEY, REDIS_CLIENT_NAME, REDIS_MASTER_NAME,
//	REDIS_CLUSTER_MODE, REDIS_MIN_REPLICAS, REDIS_QUEUE_SHARDS,
//	REDIS_KEY_PREFIX, REDIS_CA_CERT_FILE
//
//	AMQP_EXCHANGE, AMQP_EXCHANGE_TYPE, AMQP_QUEUE_DECLARE_ARGS,
//	AMQP_QUEUE_BINDING_ARGS, AMQP_BINDING_KEY, AMQP_PREFETCH_COUNT,
//	AMQP_AUTO_DELETE, AMQP_DELAYED_QUEUE
//
// envconfig looks a nested field up under its section's name first, so
// REDIS_REDIS_MAX_IDLE and AMQP_AMQP_EXCHANGE are also read, and win over
// the names above; use the names above.
//
// # Checking
//
// Validate refuses a Config that cannot work, naming the field and the
// value, with any credentials in a URL hidden (see RedactURL). NewServer
// calls WithDefaults and Validate.
package config

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Defaults of the fields left zero.
const (
	// DefaultResultsExpireIn is the default ResultsExpireIn, in seconds.
	DefaultResultsExpireIn = 3600
	// MaxQueueShards bounds each count of RedisConfig.QueueShards.
	MaxQueueShards = 64
	// DefaultQueueName is the default DefaultQueue, machinery's.
	DefaultQueueName = "machinery_tasks"

	DefaultLeaseDuration          = 10 * time.Second
	DefaultRecoverInterval        = time.Second
	DefaultMaxRecoveries          = 3
	DefaultShutdownTimeout        = 30 * time.Second
	DefaultUnregisteredTaskTries  = 10
	DefaultUnregisteredTaskDelay  = 5 * time.Second
	DefaultArchiveMaxSize         = 10000
	DefaultArchiveMaxAge          = 90 * 24 * time.Hour
	DefaultAggregationMaxSize     = 100
	DefaultAggregationMaxDelay    = time.Minute
	DefaultAggregationGracePeriod = 5 * time.Second
	DefaultAggregatorRetries      = 3
	DefaultAggregatorTimeout      = time.Minute
	DefaultMaxMessageSize         = 16 << 20 // bytes: 16 MiB
	DefaultRedisKeyPrefix         = "machinist"
	DefaultNormalTasksPollPeriod  = 1000 // ms
	DefaultDelayedTasksPollPeriod = 20   // ms
	DefaultDelayedTasksKey        = "delayed_tasks"
)

// Config configures a Server and its workers. Every field but Broker may be
// left zero for its default; Config{Broker: "memory://"} runs the Redis
// store on an in-process engine, with no Redis to set up.
type Config struct {
	// Broker is where tasks are queued: "memory://" (the Redis store on an
	// in-process engine of the Server's own), "memory://NAME" (on the
	// process's engine of that name, shared by every Server that names
	// it), "eager" (each task runs inside SendTask, before it returns), or
	// "redis://", "rediss://" or "redis+socket://" (a Unix socket) for
	// Redis. It has no default: NewServer refuses an empty one (machinery's
	// failed too); the constructors given a broker or a Redis client
	// ignore it.
	Broker string `yaml:"broker" envconfig:"BROKER"`
	// Lock names machinery's lock for LockFactory ("eager", or a
	// "redis://" URL); NewServer does not use it: periodic tasks fire once
	// per tick through the broker whatever it says.
	Lock string `yaml:"lock" envconfig:"LOCK"`
	// MultipleBrokerSeparator is accepted for compatibility and ignored
	// (machinery uses it for AMQP only). The environment name keeps
	// machinery's spelling.
	MultipleBrokerSeparator string `yaml:"multiple_broker_separator" envconfig:"MULTIPLE_BROKEN_SEPARATOR"`
	// DefaultQueue is the queue of signatures without a RoutingKey and of
	// workers without a queue. Default "machinery_tasks".
	DefaultQueue string `yaml:"default_queue" envconfig:"DEFAULT_QUEUE"`
	// ResultBackend is where states and results are kept: "memory://",
	// "memory://NAME", "eager" (same as memory://), or a Redis URL. Empty
	// (the default) means the same as Broker.
	ResultBackend string `yaml:"result_backend" envconfig:"RESULT_BACKEND"`
	// ResultsExpireIn is how long states and results are kept, in seconds.
	// Zero means 3600. Negative values are refused.
	ResultsExpireIn int `yaml:"results_expire_in" envconfig:"RESULTS_EXPIRE_IN"`
	// AMQP is accepted for compatibility and ignored: machinist has no AMQP
	// broker.
	AMQP *AMQPConfig `yaml:"amqp" envconfig:"AMQP"`
	// Redis configures the Redis connection and broker.
	Redis *RedisConfig `yaml:"redis" envconfig:"REDIS"`
	// SQS, GCPPubSub, MongoDB and DynamoDB are machinery's settings for
	// brokers and backends machinist does not have. They are accepted, so
	// that code and files that set them still build and load, and ignored;
	// a Broker or ResultBackend URL of theirs is refused by NewServer.
	SQS       *SQSConfig       `yaml:"sqs" ignored:"true"`
	GCPPubSub *GCPPubSubConfig `yaml:"-" ignored:"true"`
	MongoDB   *MongoDBConfig   `yaml:"-" ignored:"true"`
	DynamoDB  *DynamoDBConfig  `yaml:"dynamodb" ignored:"true"`
	// TLSConfig is used for Redis connections made from a "rediss://" URL.
	// It is never switched on by a plain "redis://" URL, and never set by
	// NewFromEnvironment. machinery's constructors (redisbroker.New and
	// NewGR, and redisbackend's), which take no URL, use TLS when it is set.
	TLSConfig *tls.Config `yaml:"-" ignored:"true"`
	// NoUnixSignals stops Worker.Launch from handling SIGINT and SIGTERM.
	NoUnixSignals bool `yaml:"no_unix_signals" envconfig:"NO_UNIX_SIGNALS"`

	// LeaseDuration is how long a worker holds a task it took without
	// renewing the lease. A task whose worker died runs again about this
	// long after its last renewal. Default 10s; at least 1s.
	LeaseDuration time.Duration `yaml:"lease_duration" envconfig:"LEASE_DURATION"`
	// LeaseRenewInterval is how often a worker renews the leases of its
	// running tasks. Default LeaseDuration/4; less than LeaseDuration.
	LeaseRenewInterval time.Duration `yaml:"lease_renew_interval" envconfig:"LEASE_RENEW_INTERVAL"`
	// RecoverInterval is how often the broker looks for expired leases.
	// Default 1s.
	RecoverInterval time.Duration `yaml:"recover_interval" envconfig:"RECOVER_INTERVAL"`
	// MaxRecoveries is how many times a task may come back because its
	// worker lost the lease (died, hung, or was cut off) before it is
	// archived with that reason; a task that keeps killing its worker
	// stops there. Default 3; negative means never archive for this.
	MaxRecoveries int `yaml:"max_recoveries" envconfig:"MAX_RECOVERIES"`
	// ShutdownTimeout is how long a graceful Quit waits for running tasks
	// before it cancels their contexts and puts them back in the queue
	// (tasks of machinery's queues, in the migration mode, are cancelled
	// and not put back). Default 30s.
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout" envconfig:"SHUTDOWN_TIMEOUT"`
	// UnregisteredTaskTries is how many times a task whose name a worker
	// does not have is handed back for other workers before it fails with
	// that reason (unless its IgnoreWhenTaskNotRegistered drops it at once).
	// An aggregation member that no worker alive aggregates any more is
	// tried as many times (each try puts it back in its group). Default 10.
	UnregisteredTaskTries int `yaml:"unregistered_task_tries" envconfig:"UNREGISTERED_TASK_TRIES"`
	// UnregisteredTaskDelay is how long such a task waits before it is
	// offered again. Default 5s.
	UnregisteredTaskDelay time.Duration `yaml:"unregistered_task_delay" envconfig:"UNREGISTERED_TASK_DELAY"`
	// ArchiveMaxSize is how many dead letters a queue keeps; the oldest go
	// first. Default 10000.
	ArchiveMaxSize int `yaml:"archive_max_size" envconfig:"ARCHIVE_MAX_SIZE"`
	// CompletedRetention is how long the broker keeps a task after it
	// succeeded, for inspection. Default 0: forgotten at once.
	CompletedRetention time.Duration `yaml:"completed_retention" envconfig:"COMPLETED_RETENTION"`
	// ArchiveMaxAge is how long a dead letter is kept. Default 90 days.
	ArchiveMaxAge time.Duration `yaml:"archive_max_age" envconfig:"ARCHIVE_MAX_AGE"`

	// AggregationMaxSize, AggregationMaxDelay and AggregationGracePeriod
	// are the policy of an aggregator registered with the zero policy
	// (Server.RegisterAggregator): a group of members is released when it
	// holds AggregationMaxSize members, or its oldest waited
	// AggregationMaxDelay, or no member joined for AggregationGracePeriod.
	// Defaults 100, 1m and 5s.
	AggregationMaxSize     int           `yaml:"aggregation_max_size" envconfig:"AGGREGATION_MAX_SIZE"`
	AggregationMaxDelay    time.Duration `yaml:"aggregation_max_delay" envconfig:"AGGREGATION_MAX_DELAY"`
	AggregationGracePeriod time.Duration `yaml:"aggregation_grace_period" envconfig:"AGGREGATION_GRACE_PERIOD"`
	// AggregatorRetries is how many times a batch whose aggregator failed
	// (returned an error or panicked) is tried again, after 1, 2, 3, 5 …
	// seconds, before its members are archived with the error. Default 3.
	AggregatorRetries int `yaml:"aggregator_retries" envconfig:"AGGREGATOR_RETRIES"`
	// AggregatorTimeout is how long an aggregator may take to build its
	// aggregate: past it, its context ends and the worker stops waiting
	// for it; the batch counts as failed (tried again as AggregatorRetries
	// says), so that an aggregator that never returns holds no members.
	// An aggregator builds a task, it does not do the task's work: default
	// 1m.
	AggregatorTimeout time.Duration `yaml:"aggregator_timeout" envconfig:"AGGREGATOR_TIMEOUT"`

	// MaxMessageSize is the largest message a task may have, in bytes: its
	// signature as sent, arguments and callbacks included. A send of a
	// larger one fails, before anything reaches the broker, with an error
	// wrapping brokers/iface.ErrMessageTooLarge that names both sizes.
	// Default 16 MiB (DefaultMaxMessageSize); negative: no limit.
	MaxMessageSize int `yaml:"max_message_size" envconfig:"MAX_MESSAGE_SIZE"`

	// MachineryBroker, a Redis URL, turns on the migration mode: every
	// worker also runs the tasks machinery v1 programs send to machinery's
	// Redis broker there (the list of each of its queues, and
	// Redis.DelayedTasksKey), and writes their states where machinery's
	// Redis backend keeps them (MachineryResultBackend), so that
	// machinery's clients read the results. Those tasks run with
	// machinery's delivery semantics: a task taken is lost if its worker
	// dies. See docs/migrating.md. Empty (the default): off.
	MachineryBroker string `yaml:"machinery_broker" envconfig:"MACHINERY_BROKER"`
	// MachineryResultBackend is the Redis URL of machinery's result
	// backend in the migration mode. Empty: MachineryBroker.
	MachineryResultBackend string `yaml:"machinery_result_backend" envconfig:"MACHINERY_RESULT_BACKEND"`

	// Logger receives the Server's and its workers' logs. Default:
	// slog.Default(), or, once a program replaced machinery's level
	// loggers (package log's Set…), those.
	Logger *slog.Logger `yaml:"-" ignored:"true"`

	// TracerProvider makes the spans of sending and running tasks (see
	// docs/observability.md). Default: the global one
	// (otel.GetTracerProvider): the one set with otel.SetTracerProvider,
	// before the Server was made or, the first time, after;
	// OpenTelemetry's default records nothing. Like Logger, it is taken
	// when the Server is made.
	TracerProvider trace.TracerProvider `yaml:"-" ignored:"true"`
	// MeterProvider makes the metrics of tasks, queues and workers.
	// Default: the global one (otel.GetMeterProvider).
	MeterProvider metric.MeterProvider `yaml:"-" ignored:"true"`
	// Propagator writes the trace context into Signature.Headers and
	// reads it back. Default: the global one (otel.GetTextMapPropagator),
	// which carries nothing until a program sets one, for example
	// propagation.TraceContext{} (W3C traceparent and tracestate).
	Propagator propagation.TextMapPropagator `yaml:"-" ignored:"true"`

	// reload follows the file of a Config loaded with keepReloading; nil
	// otherwise. It is a pointer, shared by the Configs it loads, so that
	// copying a Config copies no lock; copyFields leaves it out.
	reload *reloader
}

// RedisConfig configures Redis. The connection-pool fields keep machinery's
// names and are mapped onto go-redis's pool; the poll periods are accepted
// and documented as what they now mean.
type RedisConfig struct {
	// MaxIdle is the number of idle connections kept (go-redis MaxIdleConns).
	MaxIdle int `yaml:"max_idle" envconfig:"REDIS_MAX_IDLE"`
	// MaxActive caps the connections of the pool (go-redis PoolSize); 0
	// means go-redis's default of 10 per CPU.
	MaxActive int `yaml:"max_active" envconfig:"REDIS_MAX_ACTIVE"`
	// IdleTimeout closes connections idle this many seconds.
	IdleTimeout int `yaml:"max_idle_timeout" envconfig:"REDIS_IDLE_TIMEOUT"`
	// Wait is accepted for compatibility: go-redis always waits for a free
	// connection, up to ReadTimeout + 1s.
	Wait bool `yaml:"wait" envconfig:"REDIS_WAIT"`
	// ReadTimeout, WriteTimeout and ConnectTimeout are in seconds; 0 means
	// go-redis's defaults (3s, 3s, 5s).
	ReadTimeout    int `yaml:"read_timeout" envconfig:"REDIS_READ_TIMEOUT"`
	WriteTimeout   int `yaml:"write_timeout" envconfig:"REDIS_WRITE_TIMEOUT"`
	ConnectTimeout int `yaml:"connect_timeout" envconfig:"REDIS_CONNECT_TIMEOUT"`
	// NormalTasksPollPeriod is, in milliseconds, the longest an idle worker
	// blocks on Redis in one call before it checks for shutdown; a new task
	// wakes it at once whatever the value. Default 1000.
	NormalTasksPollPeriod int `yaml:"normal_tasks_poll_period" envconfig:"REDIS_NORMAL_TASKS_POLL_PERIOD"`
	// DelayedTasksPollPeriod is, in milliseconds, the longest a due
	// scheduled or retrying task waits to become pending on a Redis
	// Cluster, where each queue's maintainer polls. On a single server
	// maintainers do not poll: whatever comes due (a task sent with an
	// ETA, a retry, an aggregation group) wakes the maintainer in time,
	// and it runs at least every second, or every DelayedTasksPollPeriod
	// when that is longer. In the migration mode (MachineryBroker) it is
	// also how often each worker moves machinery's due delayed tasks to
	// their queues. Default 20.
	DelayedTasksPollPeriod int `yaml:"delayed_tasks_poll_period" envconfig:"REDIS_DELAYED_TASKS_POLL_PERIOD"`
	// DelayedTasksKey is machinery's sorted set of tasks waiting for their
	// ETA, read in the migration mode (MachineryBroker); default
	// DefaultDelayedTasksKey, "delayed_tasks". machinist's own scheduled tasks live under
	// KeyPrefix.
	DelayedTasksKey string `yaml:"delayed_tasks_key" envconfig:"REDIS_DELAYED_TASKS_KEY"`
	// ClientName is sent with CLIENT SETNAME on each connection.
	ClientName string `yaml:"client_name" envconfig:"REDIS_CLIENT_NAME"`
	// MasterName selects Redis Sentinel with this master name.
	MasterName string `yaml:"master_name" envconfig:"REDIS_MASTER_NAME"`
	// ClusterMode connects to a Redis Cluster even with one address.
	ClusterMode bool `yaml:"cluster_mode" envconfig:"REDIS_CLUSTER_MODE"`
	// MinReplicas makes every write machinist counts on (a send, a fetch,
	// a settle, a state, a chord's election, a periodic claim) wait until
	// this many replicas have it (WAIT), for at most half of ReadTimeout; a
	// write they do not confirm in time is sent again, then reported as an
	// error that says it may have happened. With a replica and MinReplicas
	// 1, a Sentinel failover loses nothing that was reported sent or
	// settled; with the default 0 (Redis's asynchronous replication) the
	// writes of the moments before a failover can be lost. Each write
	// then costs the replication's latency. On Redis Cluster it needs a
	// cluster made from the URL (not a client passed in), and a shard whose
	// replica is gone refuses writes until one is back.
	MinReplicas int `yaml:"min_replicas" envconfig:"REDIS_MIN_REPLICAS"`
	// QueueShards spreads the named queues over several hash slots, so
	// that on Redis Cluster one busy queue is served by several masters:
	// queue name → number of shards (at most MaxQueueShards; about the
	// number of masters is the useful range, as each shard costs an idle
	// worker a connection and each fetch a round trip). A sharded queue's
	// task goes to the shard its UUID hashes to (or its aggregation key,
	// unique key or limit: a task may have only one of them), and its
	// workers take from all shards: order holds within a shard, not across
	// them. The count is recorded in Redis and only grows, so every
	// process uses the shards any process created, whatever its own
	// QueueShards says; set it once every process sharing the Redis runs
	// a version that knows shards. In YAML a map; in the environment
	// "queue:3,other:2". Default none (each queue one slot). The memory
	// broker ignores it.
	QueueShards map[string]int `yaml:"queue_shards" envconfig:"REDIS_QUEUE_SHARDS"`

	// KeyPrefix starts every key machinist writes, so that two applications
	// can share a Redis. Default "machinist".
	KeyPrefix string `yaml:"key_prefix" envconfig:"REDIS_KEY_PREFIX"`
	// CACertFile is a PEM file of the CAs trusted for "rediss://"
	// connections, in addition to TLSConfig's.
	CACertFile string `yaml:"ca_cert_file" envconfig:"REDIS_CA_CERT_FILE"`
}

// SQSConfig is machinery's Amazon SQS setting: accepted and ignored.
// Client holds machinery's *sqs.SQS.
type SQSConfig struct {
	Client            interface{} `yaml:"-"`
	WaitTimeSeconds   int         `yaml:"receive_wait_time_seconds"`
	VisibilityTimeout *int        `yaml:"receive_visibility_timeout"`
}

// GCPPubSubConfig is machinery's Google Cloud Pub/Sub setting: accepted and
// ignored. Client holds machinery's *pubsub.Client.
type GCPPubSubConfig struct {
	Client       interface{}
	MaxExtension time.Duration
}

// MongoDBConfig is machinery's MongoDB backend setting: accepted and
// ignored. Client holds machinery's *mongo.Client.
type MongoDBConfig struct {
	Client   interface{}
	Database string
}

// DynamoDBConfig is machinery's DynamoDB backend setting: accepted and
// ignored. Client holds machinery's *dynamodb.DynamoDB.
type DynamoDBConfig struct {
	Client          interface{} `yaml:"-"`
	TaskStatesTable string      `yaml:"task_states_table"`
	GroupMetasTable string      `yaml:"group_metas_table"`
}

// AMQPConfig is accepted for compatibility with machinery and ignored.
type AMQPConfig struct {
	Exchange         string           `yaml:"exchange" envconfig:"AMQP_EXCHANGE"`
	ExchangeType     string           `yaml:"exchange_type" envconfig:"AMQP_EXCHANGE_TYPE"`
	QueueDeclareArgs QueueDeclareArgs `yaml:"queue_declare_args" envconfig:"AMQP_QUEUE_DECLARE_ARGS"`
	QueueBindingArgs QueueBindingArgs `yaml:"queue_binding_args" envconfig:"AMQP_QUEUE_BINDING_ARGS"`
	BindingKey       string           `yaml:"binding_key" envconfig:"AMQP_BINDING_KEY"`
	PrefetchCount    int              `yaml:"prefetch_count" envconfig:"AMQP_PREFETCH_COUNT"`
	AutoDelete       bool             `yaml:"auto_delete" envconfig:"AMQP_AUTO_DELETE"`
	DelayedQueue     string           `yaml:"delayed_queue" envconfig:"AMQP_DELAYED_QUEUE"`
}

// QueueDeclareArgs is accepted for compatibility with machinery.
type QueueDeclareArgs map[string]interface{}

// QueueBindingArgs is accepted for compatibility with machinery.
type QueueBindingArgs map[string]interface{}

// Decode sets args from "key:value,key2:value2", the form of the
// environment variable AMQP_QUEUE_DECLARE_ARGS (it implements
// envconfig.Decoder). See QueueBindingArgs.Decode.
func (args *QueueDeclareArgs) Decode(value string) error {
	m, err := decodeArgs("QueueDeclareArgs", value)
	if err != nil {
		return err
	}
	*args = m
	return nil
}

// Decode sets args from "key:value,key2:value2", the form of the
// environment variable AMQP_QUEUE_BINDING_ARGS (it implements
// envconfig.Decoder). Keys and values are trimmed of spaces and values stay
// strings; a value may contain ":" (the key ends at the first one). An
// empty string gives an empty map. An item without ":" or with an empty key
// is an error wrapping ErrInvalid; args is then left as it was.
func (args *QueueBindingArgs) Decode(value string) error {
	m, err := decodeArgs("QueueBindingArgs", value)
	if err != nil {
		return err
	}
	*args = m
	return nil
}

// decodeArgs parses "k:v,k2:v2" for the Decode methods; name is the type,
// for the error.
func decodeArgs(name, value string) (map[string]interface{}, error) {
	m := make(map[string]interface{})
	if strings.TrimSpace(value) == "" {
		return m, nil
	}
	for _, item := range strings.Split(value, ",") {
		k, v, ok := strings.Cut(item, ":")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, fmt.Errorf("%w: %s item %q: want key:value", ErrInvalid, name, item)
		}
		m[k] = strings.TrimSpace(v)
	}
	return m, nil
}
