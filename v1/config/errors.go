package config

import "errors"

// ErrInvalid is wrapped by every error that refuses a value: Validate, the
// loaders when what they read does not validate, and the Decode methods of
// QueueDeclareArgs and QueueBindingArgs.
var ErrInvalid = errors.New("config: invalid")
