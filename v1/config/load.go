package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/kelseyhightower/envconfig"
	"gopkg.in/yaml.v3"
)

// defaultConfig returns the loader defaults, the Config that NewFromYaml and
// NewFromEnvironment start from. Each call allocates new sub-configs:
// machinery shallow-copied one global default, so two loads shared (and
// wrote into) the same RedisConfig.
func defaultConfig() *Config {
	return &Config{
		DefaultQueue:    DefaultQueueName,
		ResultsExpireIn: DefaultResultsExpireIn,
		Redis:           &RedisConfig{},
		AMQP:            &AMQPConfig{},
	}
}

// NewFromYaml loads the YAML file at cnfPath over the loader defaults (see
// the package documentation for the keys and the defaults). A key that
// Config does not have, a value of the wrong type, or a configuration that
// Validate refuses once WithDefaults has filled it in is an error naming the
// file and the key or field.
//
// With keepReloading, a goroutine reads the file again every 10 seconds
// until StopReloading. The Config returned is never changed: each version of
// the file that loads and validates becomes a new Config, which Reloaded
// returns. A version that does not is logged (with slog.Default) and skipped,
// and the previous one stays. Replace the file atomically (write another file
// and rename it) so that the reloader never reads it half written.
func NewFromYaml(cnfPath string, keepReloading bool) (*Config, error) {
	data, err := ReadFromFile(cnfPath)
	if err != nil {
		return nil, err
	}
	cnf, err := parseYAML(cnfPath, data)
	if err != nil {
		return nil, err
	}
	if keepReloading {
		startReloading(cnf, cnfPath, data, reloadInterval)
	}
	return cnf, nil
}

// ReadFromFile returns the whole content of the file at cnfPath. (machinery's
// returned at most its first 1000 bytes.)
func ReadFromFile(cnfPath string) ([]byte, error) {
	data, err := os.ReadFile(cnfPath)
	if err != nil {
		// An *fs.PathError: it names the file and the operation.
		return nil, fmt.Errorf("config: %w", err)
	}
	return data, nil
}

// NewFromEnvironment loads the environment variables listed in the package
// documentation over the loader defaults. A value that does not parse, or a
// configuration that Validate refuses once WithDefaults has filled it in, is
// an error naming the variable or field.
//
// TLSConfig is always nil: envconfig allocates every nil pointer to a struct
// it walks, and machinery's NewFromEnvironment returned a non-nil empty
// tls.Config that switched TLS on for every Redis connection (its issue
// #517). Use a "rediss://" URL, or set TLSConfig in code.
func NewFromEnvironment() (*Config, error) {
	cnf := defaultConfig()
	if err := envconfig.Process("", cnf); err != nil {
		return nil, fmt.Errorf("config: environment: %w", err)
	}
	cnf.TLSConfig = nil
	if err := check(cnf); err != nil {
		return nil, fmt.Errorf("config: environment: %w", err)
	}
	return cnf, nil
}

// yamlFile is the shape of a configuration file: a Config, plus
// tlsconfig, which is refused, because ignoring a TLS setting silently
// would be worse. (sqs and dynamodb load into the Config, and are ignored.)
type yamlFile struct {
	Config    Config    `yaml:",inline"`
	TLSConfig yaml.Node `yaml:"tlsconfig"`
}

// parseYAML decodes data, the content of the file at path, over the loader
// defaults and checks the result.
func parseYAML(path string, data []byte) (*Config, error) {
	f := yamlFile{Config: *defaultConfig()}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	// io.EOF: the file holds no document (it is empty or all comments).
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		var typeErr *yaml.TypeError
		if errors.As(err, &typeErr) {
			// "field brokr not found in type config.yamlFile": name the
			// type the user knows.
			for i, e := range typeErr.Errors {
				typeErr.Errors[i] = strings.ReplaceAll(e, "config.yamlFile", "config.Config")
			}
		}
		return nil, fmt.Errorf("config: %s: %w", path, err)
	}
	if f.TLSConfig.Kind != 0 {
		return nil, fmt.Errorf("config: %s: tlsconfig cannot be set in YAML: set Config.TLSConfig in code", path)
	}
	var next yaml.Node
	if err := dec.Decode(&next); err == nil && !isEmptyDocument(&next) {
		return nil, fmt.Errorf("config: %s: line %d: a second YAML document; a configuration file holds one",
			path, next.Line)
	} else if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("config: %s: %w", path, err)
	}

	cnf := f.Config
	// "redis:" with nothing under it decodes to nil; the loaders promise
	// allocated sub-configs.
	if cnf.Redis == nil {
		cnf.Redis = &RedisConfig{}
	}
	if cnf.AMQP == nil {
		cnf.AMQP = &AMQPConfig{}
	}
	if err := check(&cnf); err != nil {
		return nil, fmt.Errorf("config: %s: %w", path, err)
	}
	return &cnf, nil
}

// isEmptyDocument reports whether n, a decoded document, holds nothing but
// null (what a trailing "---" gives).
func isEmptyDocument(n *yaml.Node) bool {
	if n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
		n = n.Content[0]
	}
	return n.Kind == 0 || n.Kind == yaml.ScalarNode && n.Tag == "!!null"
}

// check validates what a loader read, as NewServer will: with the defaults
// filled in. An unset Broker passes here and is refused by NewServer.
func check(cnf *Config) error {
	return cnf.WithDefaults().validateLoaded()
}
