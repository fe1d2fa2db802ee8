package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/b6192125/machinist/internal/ops"
	machinery "github.com/b6192125/machinist/v1"
	backendiface "github.com/b6192125/machinist/v1/backends/iface"
	brokeriface "github.com/b6192125/machinist/v1/brokers/iface"
	"github.com/b6192125/machinist/v1/config"
)

// Exit codes.
const (
	exitOK       = 0
	exitFailed   = 1
	exitUsage    = 2
	exitNotFound = 3
	exitRefused  = 4
)

// env is what the command runs with: the process's, or a test's.
type env struct {
	getenv         func(string) string
	stdout, stderr io.Writer
	// tty says stdout is a terminal (colour in auto mode).
	tty bool
}

// app is one run of the command: its flags, and the Server and Ops it
// opens on first use.
type app struct {
	env
	configPath, broker, backend, keyPrefix string
	json                                   bool
	color                                  string
	timeout                                time.Duration

	srv *machinery.Server
	ops *ops.Ops
}

// usageError is an error in the command line (exit 2).
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

// run runs the command line args and returns the exit code.
func run(args []string, e env) int {
	if f, ok := e.stdout.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			e.tty = true
		}
	}
	a := &app{env: e}
	defer a.close()
	root := a.rootCommand()
	root.SetArgs(args)
	root.SetOut(e.stdout)
	root.SetErr(e.stderr)
	err := root.ExecuteContext(context.Background())
	if err == nil {
		return exitOK
	}
	// Errors of the library name it already.
	fmt.Fprintf(e.stderr, "machinist: %s\n", strings.TrimPrefix(err.Error(), "machinist: "))
	return exitCode(err)
}

// exitCode maps err to the exit code that says what kind of failure it is.
func exitCode(err error) int {
	var usage usageError
	switch {
	case errors.As(err, &usage), isCobraUsage(err):
		return exitUsage
	case errors.Is(err, ops.ErrQueueNotFound), errors.Is(err, brokeriface.ErrTaskNotFound),
		errors.Is(err, backendiface.ErrWorkflowNotFound):
		return exitNotFound
	case errors.Is(err, brokeriface.ErrTaskNotWaiting), errors.Is(err, machinery.ErrTaskFinished):
		return exitRefused
	}
	return exitFailed
}

// isCobraUsage recognises cobra's own errors about the command line
// (unknown command or flag, wrong number of arguments), which are plain
// errors.
func isCobraUsage(err error) bool {
	msg := err.Error()
	for _, s := range []string{"unknown command", "unknown flag", "unknown shorthand flag", "flag needs an argument",
		"invalid argument", "accepts ", "requires at least", "requires exactly"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

func (a *app) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "machinist",
		Short: "Inspect and drive machinist's queues, tasks, workflows and workers",
		Long: `machinist inspects and drives the queues, tasks, workflows and workers of a
machinist deployment on Redis, and serves its web dashboard.

Configuration, as the library reads it: flags first, then the environment
(BROKER, RESULT_BACKEND, REDIS_KEY_PREFIX, …), then the YAML file named by
--config or MACHINIST_CONFIG.

Output is a table for people; --json prints JSON for scripts. Colour is used
only on a terminal (--color, NO_COLOR).

Exit codes: 0 done; 1 failed (Redis unreachable, a bad configuration); 2 bad
usage; 3 not found (queue, task or workflow); 4 refused (the action does not
apply to where the task is, or it has finished).`,
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	pf := root.PersistentFlags()
	pf.StringVar(&a.configPath, "config", "", "YAML configuration file (default $MACHINIST_CONFIG)")
	pf.StringVar(&a.broker, "broker", "", "broker URL, e.g. redis://localhost:6379 (default $BROKER, then the file's)")
	pf.StringVar(&a.backend, "result-backend", "", "result backend URL (default $RESULT_BACKEND, then the file's, then the broker)")
	pf.StringVar(&a.keyPrefix, "key-prefix", "", "Redis key prefix (default $REDIS_KEY_PREFIX, then the file's, then machinist)")
	pf.BoolVar(&a.json, "json", false, "print JSON instead of tables")
	pf.StringVar(&a.color, "color", "auto", "colour: auto (on a terminal, unless NO_COLOR is set), always or never")
	pf.DurationVar(&a.timeout, "timeout", 30*time.Second, "give up on a command after this long")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.AddCommand(a.statsCommand(), a.queueCommand(), a.taskCommand(), a.workflowCommand(), a.workersCommand())
	if dash := a.dashCommand(); dash != nil {
		root.AddCommand(dash)
	}
	return root
}

// config returns the configuration: flags, then the environment, then
// the file.
func (a *app) config() (*config.Config, error) {
	path := a.configPath
	if path == "" {
		path = a.getenv("MACHINIST_CONFIG")
	}
	var cnf *config.Config
	var err error
	if path != "" {
		cnf, err = config.NewFromYaml(path, false)
	} else {
		cnf, err = config.NewFromEnvironment()
	}
	if err != nil {
		return nil, err
	}
	// The environment over the file, for the fields that say where to
	// connect (read again without a file: the command's environment may
	// be a test's).
	for name, field := range map[string]*string{"BROKER": &cnf.Broker, "RESULT_BACKEND": &cnf.ResultBackend,
		"DEFAULT_QUEUE": &cnf.DefaultQueue, "REDIS_KEY_PREFIX": &cnf.Redis.KeyPrefix} {
		if v := a.getenv(name); v != "" {
			*field = v
		}
	}
	if a.broker != "" {
		cnf.Broker = a.broker // the result backend too, unless one is set
	}
	if a.backend != "" {
		cnf.ResultBackend = a.backend
	}
	if a.keyPrefix != "" {
		cnf.Redis.KeyPrefix = a.keyPrefix
	}
	if !strings.HasPrefix(cnf.Broker, "redis") {
		return nil, usagef("the broker is %q, which the command cannot reach from outside the program that uses it: "+
			"point --broker, BROKER or --config at the Redis your workers use (redis://host:6379)", redact(cnf.Broker))
	}
	cnf.NoUnixSignals = true
	// The command says what failed in its error; the library's logs (the
	// Redis client's retries) would repeat it.
	cnf.Logger = slog.New(slog.DiscardHandler)
	return cnf, nil
}

// redact returns url without the password it may hold.
func redact(url string) string {
	scheme, rest, ok := strings.Cut(url, "://")
	if !ok {
		return url
	}
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		return scheme + "://***@" + rest[at+1:]
	}
	return url
}

// open returns the Ops of the configured deployment, opened once.
func (a *app) open() (*ops.Ops, error) {
	if a.ops != nil {
		return a.ops, nil
	}
	cnf, err := a.config()
	if err != nil {
		return nil, err
	}
	srv, err := machinery.NewServer(cnf)
	if err != nil {
		return nil, err
	}
	o, err := ops.New(srv)
	if err != nil {
		srv.Close()
		return nil, err
	}
	a.srv, a.ops = srv, o
	return o, nil
}

func (a *app) close() {
	if a.srv != nil {
		a.srv.Close()
	}
}

// ctx returns the context a command runs in: cancelled after --timeout.
func (a *app) ctx(cmd *cobra.Command) (context.Context, context.CancelFunc) {
	return context.WithTimeout(cmd.Context(), a.timeout)
}

// withOps wraps a command's body: it opens the deployment and runs fn
// with a context bounded by --timeout.
func (a *app) withOps(fn func(ctx context.Context, o *ops.Ops, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		o, err := a.open()
		if err != nil {
			return err
		}
		ctx, cancel := a.ctx(cmd)
		defer cancel()
		return fn(ctx, o, args)
	}
}
