package rdb

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"testing"

	goredis "github.com/redis/go-redis/v9"
)

// redisError is a reply error as go-redis returns one.
type redisError string

func (e redisError) Error() string { return string(e) }
func (redisError) RedisError()     {}

func TestUncertain(t *testing.T) {
	timeout := &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{timeout, true},
		{fmt.Errorf("publish: %w", timeout), true},
		{io.EOF, true},
		{io.ErrUnexpectedEOF, true},
		{redisError("LOADING Redis is loading the dataset in memory"), true},
		{redisError("READONLY You can't write against a read only replica."), true},
		{redisError("BUSY Redis is busy running a script."), true},
		{redisError("NOSCRIPT No matching script."), false},
		{redisError("ERR wrong number of arguments"), false},
		{context.Canceled, false},
		{context.DeadlineExceeded, false},
		{goredis.ErrClosed, false},
		{errors.New("rdb: batcher closed"), false},
	} {
		if got := uncertain(tc.err); got != tc.want {
			t.Errorf("uncertain(%v) = %t, want %t", tc.err, got, tc.want)
		}
	}
}
