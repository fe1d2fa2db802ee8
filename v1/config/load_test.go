package config

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

func TestNewFromYamlReadsEveryKey(t *testing.T) {
	t.Parallel()
	got, err := NewFromYaml("testdata/full.yml", false)
	if err != nil {
		t.Fatal(err)
	}
	// Every field a file can set must be set by full.yml.
	// The clients and the sections that have no YAML (machinery's neither)
	// are set in code only.
	checkAllSet(t, reflect.ValueOf(got), "", map[string]bool{"TLSConfig": true, "Logger": true, "TracerProvider": true, "MeterProvider": true, "Propagator": true,
		"SQS.Client": true, "DynamoDB.Client": true, "GCPPubSub": true, "MongoDB": true})
	visibility := 456
	want := &Config{
		Broker:                  "redis://:password@localhost:6379/1",
		Lock:                    "eager",
		MultipleBrokerSeparator: ",",
		DefaultQueue:            "full_queue",
		ResultBackend:           "redis://:password@localhost:6379/2",
		ResultsExpireIn:         7200,
		NoUnixSignals:           true,
		AMQP: &AMQPConfig{
			Exchange:         "full_exchange",
			ExchangeType:     "topic",
			QueueDeclareArgs: QueueDeclareArgs{"x-max-priority": 10},
			QueueBindingArgs: QueueBindingArgs{"image-type": "png", "x-match": "any"},
			BindingKey:       "full_binding_key",
			PrefetchCount:    7,
			AutoDelete:       true,
			DelayedQueue:     "full_delayed_queue",
		},
		Redis: &RedisConfig{
			MaxIdle:                12,
			MaxActive:              123,
			IdleTimeout:            456,
			Wait:                   true,
			ReadTimeout:            17,
			WriteTimeout:           19,
			ConnectTimeout:         21,
			NormalTasksPollPeriod:  1001,
			DelayedTasksPollPeriod: 23,
			DelayedTasksKey:        "full_delayed_tasks",
			ClientName:             "full_client",
			MasterName:             "full_master",
			ClusterMode:            true,
			MinReplicas:            1,
			QueueShards:            map[string]int{"busy": 3, "other": 2},
			KeyPrefix:              "full",
			CACertFile:             "/etc/ssl/full-ca.pem",
		},
		SQS:                   &SQSConfig{WaitTimeSeconds: 123, VisibilityTimeout: &visibility},
		DynamoDB:              &DynamoDBConfig{TaskStatesTable: "task_states", GroupMetasTable: "group_metas"},
		LeaseDuration:         15 * time.Second,
		LeaseRenewInterval:    3 * time.Second,
		RecoverInterval:       2 * time.Second,
		MaxRecoveries:         5,
		ShutdownTimeout:       time.Minute,
		UnregisteredTaskTries: 4,
		UnregisteredTaskDelay: 1500 * time.Millisecond,
		ArchiveMaxSize:        500,
		ArchiveMaxAge:         7 * 24 * time.Hour,
		CompletedRetention:    30 * time.Minute,

		AggregationMaxSize:     50,
		AggregationMaxDelay:    2 * time.Minute,
		AggregationGracePeriod: 10 * time.Second,
		AggregatorRetries:      5,
		AggregatorTimeout:      30 * time.Second,
		MaxMessageSize:         1 << 20,
		MachineryBroker:        "redis://legacy:6379/1",
		MachineryResultBackend: "redis://legacy:6379/2",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("NewFromYaml(full.yml) =\n%+v\nAMQP %+v\nRedis %+v\nwant\n%+v\nAMQP %+v\nRedis %+v",
			got, got.AMQP, got.Redis, want, want.AMQP, want.Redis)
	}
}

// machinery read the first 1000 bytes of a file and silently dropped the
// rest (its issue #213).
func TestNewFromYamlReadsPastTheFirst1000Bytes(t *testing.T) {
	t.Parallel()
	const path = "testdata/large.yml"
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if info.Size() <= 1000 {
		t.Fatalf("%s has %d bytes; it must have more than 1000 to test anything", path, info.Size())
	}
	data, err := ReadFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(data)) != info.Size() {
		t.Errorf("ReadFromFile returned %d bytes of %d", len(data), info.Size())
	}
	cnf, err := NewFromYaml(path, false)
	if err != nil {
		t.Fatal(err)
	}
	if i := strings.Index(string(data), "default_queue:"); i < 1000 {
		t.Fatalf("default_queue is at byte %d of %s; it must be past byte 1000", i, path)
	}
	if cnf.DefaultQueue != "large_queue_at_the_end" || cnf.Redis.ClientName != "large_client" ||
		cnf.Broker != "memory://large" || cnf.Redis.KeyPrefix != "large" {
		t.Errorf("NewFromYaml(%s) = %+v, Redis %+v: keys missing", path, cnf, cnf.Redis)
	}
}

func TestNewFromYamlStartsFromTheLoaderDefaults(t *testing.T) {
	t.Parallel()
	for name, content := range map[string]string{
		"empty":         "",
		"comments only": "# nothing here\n",
		"empty map":     "{}\n",
		"null sections": "redis:\namqp:\n",
		"trailing ---":  "---\n---\n",
	} {
		got, err := NewFromYaml(tempFile(t, content), false)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if !reflect.DeepEqual(got, defaultConfig()) {
			t.Errorf("%s: NewFromYaml = %+v, want the loader defaults %+v", name, got, defaultConfig())
		}
	}

	got, err := NewFromYaml(tempFile(t, "redis:\n  key_prefix: app\n"), false)
	if err != nil {
		t.Fatal(err)
	}
	want := defaultConfig()
	want.Redis.KeyPrefix = "app"
	if !reflect.DeepEqual(got, want) {
		t.Errorf("NewFromYaml = %+v, Redis %+v; want the defaults with only key_prefix set", got, got.Redis)
	}
}

func TestNewFromYamlGivesEachLoadItsOwnSubConfigs(t *testing.T) {
	t.Parallel()
	path := tempFile(t, "redis:\n  max_idle: 4\n")
	a, err := NewFromYaml(path, false)
	if err != nil {
		t.Fatal(err)
	}
	a.Redis.MaxIdle = 99
	a.AMQP.Exchange = "changed"
	b, err := NewFromYaml(path, false)
	if err != nil {
		t.Fatal(err)
	}
	if a.Redis == b.Redis || a.AMQP == b.AMQP {
		t.Fatal("two loads share a sub-config")
	}
	if b.Redis.MaxIdle != 4 || b.AMQP.Exchange != "" {
		t.Errorf("second load sees the first one's changes: Redis %+v, AMQP %+v", b.Redis, b.AMQP)
	}
	// The file without a redis section: the defaults must be fresh too.
	c, err := NewFromYaml(tempFile(t, ""), false)
	if err != nil {
		t.Fatal(err)
	}
	if c.Redis.MaxIdle != 0 || c.AMQP.Exchange != "" {
		t.Errorf("a later load sees an earlier one's changes: Redis %+v, AMQP %+v", c.Redis, c.AMQP)
	}
}

func TestNewFromYamlDurations(t *testing.T) {
	t.Parallel()
	got, err := NewFromYaml(tempFile(t, "lease_duration: 1m30s\nshutdown_timeout: 2h\narchive_max_age: 1.5h\n"), false)
	if err != nil {
		t.Fatal(err)
	}
	if got.LeaseDuration != 90*time.Second || got.ShutdownTimeout != 2*time.Hour || got.ArchiveMaxAge != 90*time.Minute {
		t.Errorf("durations = %s, %s, %s; want 1m30s, 2h, 1h30m", got.LeaseDuration, got.ShutdownTimeout, got.ArchiveMaxAge)
	}
}

func TestNewFromYamlRefuses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		content string
		want    []string // in the error, besides the file name
		wantErr error    // wrapped by the error, if not nil
	}{
		{"misspelt key", "brokr: redis://\n", []string{"line 1: field brokr not found in type config.Config"}, nil},
		{"misspelt redis key", "redis:\n  max_idel: 3\n", []string{"max_idel", "RedisConfig"}, nil},
		{"misspelt amqp key", "amqp:\n  exchang: x\n", []string{"exchang"}, nil},
		{"duration without unit", "lease_duration: 15\n", []string{"time.Duration", "line 1"}, nil},
		{"bad duration", "lease_duration: soon\n", []string{"soon"}, nil},
		{"string for int", "results_expire_in: forever\n", []string{"forever"}, nil},
		{"broken yaml", "broker: [\n", []string{"line"}, nil},
		{"tlsconfig", "tlsconfig:\n  insecureskipverify: true\n", []string{"tlsconfig", "in code"}, nil},
		{"two documents", "broker: eager\n---\nbroker: memory://\n", []string{"second YAML document", "line 2"}, nil},
		{"invalid broker", "broker: amqp://guest:secret@localhost:5672/\n", []string{"Broker", `"amqp://***@localhost:5672/"`}, ErrInvalid},
		{"invalid value", "redis:\n  max_idle: -1\n", []string{"Redis.MaxIdle = -1"}, ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path := tempFile(t, tt.content)
			cnf, err := NewFromYaml(path, false)
			if err == nil {
				t.Fatalf("NewFromYaml = %+v, want an error", cnf)
			}
			msg := err.Error()
			for _, w := range append(tt.want, path) {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not contain %q", msg, w)
				}
			}
			if strings.Contains(msg, "secret") {
				t.Errorf("error %q shows a password", msg)
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("error %q does not wrap %v", msg, tt.wantErr)
			}
		})
	}
}

func TestNewFromYamlWrapsTheCause(t *testing.T) {
	t.Parallel()
	_, err := NewFromYaml(tempFile(t, "brokr: x\n"), false)
	var typeErr *yaml.TypeError
	if !errors.As(err, &typeErr) {
		t.Errorf("error %v does not wrap a *yaml.TypeError", err)
	}

	missing := filepath.Join(t.TempDir(), "missing.yml")
	_, err = NewFromYaml(missing, false)
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), missing) {
		t.Errorf("NewFromYaml(missing) = %v, want fs.ErrNotExist naming the file", err)
	}
	if _, err := ReadFromFile(missing); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ReadFromFile(missing) = %v, want fs.ErrNotExist", err)
	}
}
