// Command worker runs tasks sent by example/producer, from another
// process, until it receives SIGINT or SIGTERM. Both read their
// configuration from the environment and meet on Redis:
//
//	export BROKER=redis://localhost:6379 RESULT_BACKEND=redis://localhost:6379
//	go run ./example/worker     # in one terminal
//	go run ./example/producer   # in another
//
// README.md shows its run function; a test in v1
// (TestREADMEGoBlocksAreTestedCode) keeps the two the same.
package main

import (
	"errors"
	"log"
	"os"

	"github.com/b6192125/machinist/v1"
	"github.com/b6192125/machinist/v1/config"
)

func main() {
	// Without BROKER, NewServer would refuse to start and suggest the
	// in-process broker, which the producer, in its own process, cannot reach.
	if os.Getenv("BROKER") == "" {
		log.Fatal("set BROKER and RESULT_BACKEND, e.g. BROKER=redis://localhost:6379 RESULT_BACKEND=redis://localhost:6379")
	}
	if err := run(); err != nil {
		log.Fatal(err)
	}
}

func run() error {
	cnf, err := config.NewFromEnvironment() // BROKER, RESULT_BACKEND, DEFAULT_QUEUE, ...
	if err != nil {
		return err
	}
	server, err := machinery.NewServer(cnf)
	if err != nil {
		return err
	}
	defer server.Close()
	err = server.RegisterTasks(map[string]interface{}{"add": Add, "multiply": Multiply})
	if err != nil {
		return err
	}

	// Launch returns after SIGINT or SIGTERM, once the running tasks have
	// finished (those still running after ShutdownTimeout go back to their
	// queue, for another worker).
	err = server.NewWorker("worker", 10).Launch()
	if errors.Is(err, machinery.ErrWorkerQuitGracefully) {
		return nil
	}
	return err
}

// Add returns the sum of args.
func Add(args ...int64) (int64, error) {
	var sum int64
	for _, a := range args {
		sum += a
	}
	return sum, nil
}

// Multiply returns the product of args.
func Multiply(args ...int64) (int64, error) {
	product := int64(1)
	for _, a := range args {
		product *= a
	}
	return product, nil
}
