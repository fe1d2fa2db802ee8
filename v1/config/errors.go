package config

import (
	"errors"
	"fmt"
)

// ErrInvalid is wrapped by every error that refuses a value: Validate, the
// loaders when what they read does not validate, and the Decode methods of
// QueueDeclareArgs and QueueBindingArgs.
var ErrInvalid = errors.New("config: invalid")

// errNoBroker refuses a Config whose Broker is unset, most often an unset
// environment variable or a YAML file that failed to load.
var errNoBroker = fmt.Errorf(`%w: Broker (environment BROKER, YAML broker) is not set: `+
	`set it to "memory://" for an in-process broker or "redis://host:port" for Redis`, ErrInvalid)
