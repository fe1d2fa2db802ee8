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
	replies := make([]string, len(cmds))
	for i := range cmds {
		if replies[i], err = readReply(r); err != nil {
			return nil, fmt.Errorf("%s: %w", cmds[i][0], err)
		}
	}
	return replies, nil
}

// readReply reads a simple string, error, integer or bulk string reply.
func readReply(r *bufio.Reader) (string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return "", errors.New("empty reply")
	}
	switch line[0] {
	case '+', ':':
		return line[1:], nil
	case '-':
		return "", errors.New(line[1:])
	case '$':
		n, err := strconv.Atoi(line[1:])
		if err != nil {
			return "", fmt.Errorf("bad bulk length %q", line)
		}
		if n < 0 {
			return "", nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	default:
		return "", fmt.Errorf("unexpected reply %q", line)
	}
}
