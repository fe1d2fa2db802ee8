// Command machinist inspects and drives the queues, tasks, workflows and
// workers of a machinist deployment, and serves its web dashboard.
//
//	go install github.com/b6192125/machinist/cmd/machinist@latest
//	machinist --broker redis://localhost:6379 stats
//
// It reads the configuration the library reads: flags first, then the
// environment (BROKER, RESULT_BACKEND, REDIS_KEY_PREFIX, …), then the YAML
// file named by --config or MACHINIST_CONFIG. Run `machinist help` for
// the commands, and `machinist help <command>` for one.
//
// Exit codes: 0 done; 1 failed (Redis unreachable, a bad configuration);
// 2 bad usage; 3 not found (queue, task or workflow); 4 refused (the
// action does not apply to where the task is, or it has finished).
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], env{getenv: os.Getenv, stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr})
	stop()
	os.Exit(code)
}
