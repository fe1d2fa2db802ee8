package redistest

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"
)

// probeTimeout bounds one readiness probe of a server.
const probeTimeout = time.Second

// probe runs commands on a connection of its own and returns their replies.
//
// Readiness is probed with a bare RESP connection rather than a go-redis
// client: while nothing listens yet, a go-redis pool retries each dial with
// a backoff and, once its dials have failed PoolSize times, only dials again
// once a second from a goroutine of its own, which would both slow the
// polling down and outlive the client.
func probe(ctx context.Context, addr string, cmds ...[]string) ([]string, error) {
	return probeTLS(ctx, addr, nil, cmds...)
}

// probeTLS is probe over TLS with tc, or over plain TCP if tc is nil.
func probeTLS(ctx context.Context, addr string, tc *tls.Config, cmds ...[]string) ([]string, error) {
	values, err := roundTrip(ctx, addr, tc, cmds...)
	if err != nil {
		return nil, err
	}
	replies := make([]string, len(values))
	for i, v := range values {
		s, ok := v.(string)
		if !ok && v != nil {
			return nil, fmt.Errorf("%s: unexpected array reply", cmds[i][0])
		}
		replies[i] = s
	}
	return replies, nil
}

// query runs one command as probe does and returns its reply: a string,
// or a []any for an array (SENTINEL commands answer with arrays).
func query(ctx context.Context, addr string, args ...string) (any, error) {
	values, err := roundTrip(ctx, addr, nil, args)
	if err != nil {
		return nil, err
	}
	return values[0], nil
}

// roundTrip runs commands on a connection of its own, over TLS with tc
// or over plain TCP if tc is nil, and returns their replies (see
// readValue).
func roundTrip(ctx context.Context, addr string, tc *tls.Config, cmds ...[]string) ([]any, error) {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	var conn net.Conn
	var err error
	if tc != nil {
		conn, err = (&tls.Dialer{Config: tc}).DialContext(ctx, "tcp", addr)
	} else {
		conn, err = (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	}
	if err != nil {
		return nil, err
	}
	defer func() { _ = conn.Close() }()
	deadline, _ := ctx.Deadline()
	if err := conn.SetDeadline(deadline); err != nil {
		return nil, err
	}

	var req strings.Builder
	for _, args := range cmds {
		fmt.Fprintf(&req, "*%d\r\n", len(args))
		for _, a := range args {
			fmt.Fprintf(&req, "$%d\r\n%s\r\n", len(a), a)
		}
	}
	if _, err := io.WriteString(conn, req.String()); err != nil {
		return nil, err
	}
	r := bufio.NewReader(conn)
	replies := make([]any, len(cmds))
	for i := range cmds {
		if replies[i], err = readValue(r); err != nil {
			return nil, fmt.Errorf("%s: %w", cmds[i][0], err)
		}
	}
	return replies, nil
}

// readValue reads a RESP2 reply: a simple string, integer or bulk string
// as a string (a nil bulk string as ""), an array as a []any (a nil array
// as nil), an error reply as an error.
func readValue(r *bufio.Reader) (any, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return nil, errors.New("empty reply")
	}
	switch line[0] {
	case '+', ':':
		return line[1:], nil
	case '-':
		return nil, errors.New(line[1:])
	case '$':
		n, err := strconv.Atoi(line[1:])
		if err != nil {
			return nil, fmt.Errorf("bad bulk length %q", line)
		}
		if n < 0 {
			return "", nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, err
		}
		return string(buf[:n]), nil
	case '*':
		n, err := strconv.Atoi(line[1:])
		if err != nil {
			return nil, fmt.Errorf("bad array length %q", line)
		}
		if n < 0 {
			return nil, nil
		}
		list := make([]any, n)
		for i := range list {
			if list[i], err = readValue(r); err != nil {
				return nil, err
			}
		}
		return list, nil
	default:
		return nil, fmt.Errorf("unexpected reply %q", line)
	}
}
