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

	"github.com/kelseyhightower/envconfig"
	"github.com/spf13/cobra"

	"github.com/b6192125/machinist/internal/ops"
	"github.com/b6192125/machinist/internal/pair"
	machinery "github.com/b6192125/machinist/v1"
	backends "github.com/b6192125/machinist/v1/backends/iface"
	brokers "github.com/b6192125/machinist/v1/brokers/iface"
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
	stdin          io.Reader
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
	// where is the broker's URL without its password, once configured.
	where string
}

// usageError is an error in the command line (exit 2).
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// runError is the error of a command that ran: what failed, not how it
// was asked. Every other error Execute returns is cobra's, about the
// command line (unknown command or flag, wrong arguments).
type runError struct{ err error }

func (e runError) Error() string { return e.err.Error() }
func (e runError) Unwrap() error { return e.err }

// runs marks the errors of fn as those of a command that ran.
func runs(fn func(*cobra.Command, []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		if err := fn(cmd, args); err != nil {
			return runError{err}
		}
		return nil
	}
}

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

// run runs the command line args until ctx ends (dash serves until then)
// and returns the exit code.
func run(ctx context.Context, args []string, e env) int {
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
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return exitOK
	}
	code := exitCode(err)
	msg := strings.TrimPrefix(err.Error(), "machinist: ") // errors of the library name it already
	if code == exitFailed && a.where != "" && !strings.Contains(msg, a.where) {
		msg += " (broker " + a.where + ")" // which Redis failed
	}
	fmt.Fprintf(e.stderr, "machinist: %s\n", msg)
	if ran := (runError{}); cmd != nil && !errors.As(err, &ran) {
		// A command line cobra refused (a wrong number of arguments, an
		// unknown flag…) gets the usage line of the command it reached.
		fmt.Fprintf(e.stderr, "Usage: %s\n", cmd.UseLine())
	}
	return code
}

// exitCode maps err to the exit code that says what kind of failure it is.
func exitCode(err error) int {
	var usage usageError
	var ran runError
	switch {
	case errors.As(err, &usage), !errors.As(err, &ran):
		return exitUsage
	case errors.Is(err, ops.ErrQueueNotFound), errors.Is(err, brokers.ErrTaskNotFound),
		errors.Is(err, backends.ErrWorkflowNotFound):
		return exitNotFound
	case errors.Is(err, brokers.ErrTaskNotWaiting), errors.Is(err, machinery.ErrTaskFinished), errors.Is(err, brokers.ErrQueueNotEmpty):
		return exitRefused
	}
	return exitFailed
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
usage (with the command's usage line when the command line is wrong); 3 not
found (queue, task or workflow); 4 refused (the action does not apply to
where the task is, or the task has finished: the same answer from cancel,
delete, archive, run and requeue).`,
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
	root.AddCommand(a.statsCommand(), a.queueCommand(), a.taskCommand(), a.workflowCommand(), a.workersCommand(), a.periodicCommand(), a.dashCommand())
	return root
}

// parent returns a command that only holds subcommands: run alone, it is
// a usage error that names them.
func parent(use, short string) *cobra.Command {
	return &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var names []string
			for _, c := range cmd.Commands() {
				if c.IsAvailableCommand() {
					names = append(names, c.Name())
				}
			}
			return usagef("%s needs a subcommand: %s", use, strings.Join(names, ", "))
		},
	}
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
		if err == nil {
			// Every variable the library reads, over the file.
			if err = envconfig.Process("", cnf); err != nil {
				err = fmt.Errorf("config: environment: %w", err)
			}
			cnf.TLSConfig = nil // as NewFromEnvironment leaves it
		}
	} else {
		cnf, err = config.NewFromEnvironment()
	}
	if err != nil {
		return nil, err
	}
	// The fields that say where to connect, read again from the
	// command's environment (a test's own).
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
	if cnf.Broker == "" {
		return nil, usagef("no broker is set: point --broker, BROKER or --config at the Redis your workers use (redis://host:6379)")
	}
	if !strings.HasPrefix(cnf.Broker, "redis") {
		return nil, usagef("the broker is %q, which the command cannot reach from outside the program that uses it: "+
			"point --broker, BROKER or --config at the Redis your workers use (redis://host:6379)", config.RedactURL(cnf.Broker))
	}
	a.where = config.RedactURL(cnf.Broker)
	cnf.NoUnixSignals = true
	// The command says what failed in its error; the library's logs (the
	// Redis client's retries) would repeat it.
	cnf.Logger = slog.New(slog.DiscardHandler)
	return cnf, nil
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
	o, err := ops.New(pair.New(srv.GetBroker(), srv.GetBackend(), srv.Logger()), srv)
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
	return runs(func(cmd *cobra.Command, args []string) error {
		o, err := a.open()
		if err != nil {
			return err
		}
		ctx, cancel := a.ctx(cmd)
		defer cancel()
		return fn(ctx, o, args)
	})
}
