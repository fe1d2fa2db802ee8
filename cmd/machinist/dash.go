package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/b6192125/machinist/v1/dashboard"
)

func (a *app) dashCommand() *cobra.Command {
	var addr, user, prefix string
	var readOnly bool
	cmd := &cobra.Command{
		Use:   "dash",
		Short: "Serve the web dashboard",
		Long: `dash serves the web dashboard (package v1/dashboard) until it is interrupted:
queues with live counts and throughput, tasks by state, task details, workflow
graphs, aggregation groups, workers, and the operator's actions behind a
confirmation and a CSRF check.

It listens on 127.0.0.1 unless --addr says otherwise. With --user, every
request needs that user and the password in $MACHINIST_DASH_PASSWORD (never a
flag: flags show in ps). --read-only hides and refuses every action.`,
		Args: cobra.NoArgs,
		RunE: runs(func(cmd *cobra.Command, _ []string) error {
			if prefix = strings.Trim(prefix, "/"); prefix != "" {
				prefix = "/" + prefix
			}
			opts := dashboard.Options{ReadOnly: readOnly, Prefix: prefix}
			if user != "" {
				opts.BasicAuth = dashboard.BasicAuth{User: user, Password: a.getenv("MACHINIST_DASH_PASSWORD")}
				if opts.BasicAuth.Password == "" {
					return usagef("--user %s needs a password in $MACHINIST_DASH_PASSWORD", user)
				}
			}
			if _, err := a.open(); err != nil {
				return err
			}
			opts.Logger = slog.New(slog.NewTextHandler(a.stderr, nil))
			h, err := dashboard.New(a.srv, opts)
			if err != nil {
				return err
			}
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return fmt.Errorf("dashboard: %w", err)
			}
			mux := http.NewServeMux()
			mount := prefix + "/"
			mux.Handle(mount, h)
			if prefix != "" {
				mux.Handle(prefix, h) // redirects to mount
			}
			srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute,
				WriteTimeout: time.Minute, IdleTimeout: 2 * time.Minute}
			mode := ""
			if readOnly {
				mode = " (read-only)"
			}
			fmt.Fprintf(a.stdout, "dashboard on http://%s%s%s; interrupt to stop\n", ln.Addr(), mount, mode)
			done := make(chan error, 1)
			go func() { done <- srv.Serve(ln) }()
			select {
			case err := <-done:
				return fmt.Errorf("dashboard: %w", err)
			case <-cmd.Context().Done():
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := srv.Shutdown(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
				return fmt.Errorf("dashboard: stop: %w", err)
			}
			return nil
		}),
	}
	f := cmd.Flags()
	f.StringVar(&addr, "addr", "127.0.0.1:8080", "address to listen on")
	f.StringVar(&user, "user", "", "require basic auth as this user (password from $MACHINIST_DASH_PASSWORD)")
	f.StringVar(&prefix, "prefix", "", "path to serve under, e.g. /machinist")
	f.BoolVar(&readOnly, "read-only", false, "hide and refuse every action")
	return cmd
}
