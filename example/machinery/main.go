// Command machinery is a program written the way machinery v1 programs are
// written: the root package imported without a name and used as
// machinery, logging through v1/log, a worker and a sender as two
// commands, errors reported with log.FATAL. A program like it moves to
// machinist by changing its import prefix
// (github.com/RichardKnop/machinery/v1 → github.com/b6192125/machinist/v1)
// and nothing else.
//
//	go run ./example/machinery           # a worker and a sender in one process
//	go run ./example/machinery worker    # a worker, until SIGINT or SIGTERM
//	go run ./example/machinery send      # send tasks, print their results
//
// The config comes from the YAML file named by -c, else from the
// environment (BROKER, RESULT_BACKEND, ...). BROKER=memory:// is the
// in-process broker, which only the one-process form can use; with no
// broker set, NewServer refuses to start, as machinery's did.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/b6192125/machinist/v1"
	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/log"
	"github.com/b6192125/machinist/v1/tasks"
)

func main() {
	configPath := flag.String("c", "", "path to a YAML config file")
	flag.Parse()
	server, err := startServer(*configPath)
	if err != nil {
		log.FATAL.Fatalln(err)
	}
	switch flag.Arg(0) {
	case "worker":
		err = worker(server)
	case "send":
		err = send(server)
	case "":
		err = both(server)
	default:
		err = fmt.Errorf("unknown command %q: want worker, send or none", flag.Arg(0))
	}
	if err != nil {
		log.FATAL.Fatalln(err)
	}
}

func loadConfig(path string) (*config.Config, error) {
	if path != "" {
		return config.NewFromYaml(path, false)
	}
	return config.NewFromEnvironment()
}

func startServer(configPath string) (*machinery.Server, error) {
	cnf, err := loadConfig(configPath)
	if err != nil {
		return nil, err
	}
	server, err := machinery.NewServer(cnf)
	if err != nil {
		return nil, err
	}
	return server, server.RegisterTasks(map[string]interface{}{
		"add":         Add,
		"multiply":    Multiply,
		"sum_floats":  SumFloats,
		"split":       Split,
		"concat":      Concat,
		"panic_task":  PanicTask,
		"flaky":       Flaky,
		"long_runner": LongRunner,
	})
}

func worker(server *machinery.Server) error {
	w := server.NewWorker("machinery_worker", 0) // 0: twice the CPUs
	w.SetPreTaskHandler(func(s *tasks.Signature) { log.INFO.Println("I am a start of task handler for:", s.Name) })
	w.SetPostTaskHandler(func(s *tasks.Signature) { log.INFO.Println("I am an end of task handler for:", s.Name) })
	w.SetErrorHandler(func(err error) { log.ERROR.Println("I am an error handler:", err) })
	return w.Launch()
}

// both runs a worker and the sender in one process, then stops the worker.
func both(server *machinery.Server) error {
	w := server.NewWorker("machinery_worker", 4)
	w.SetErrorHandler(func(err error) { log.ERROR.Println("I am an error handler:", err) })
	errs := make(chan error, 1)
	w.LaunchAsync(errs)
	sendErr := send(server)
	w.Quit()
	return errors.Join(sendErr, <-errs)
}

func send(server *machinery.Server) error {
	const wait = 5 * time.Millisecond
	addTask := tasks.Signature{
		Name: "add",
		Args: []tasks.Arg{{Type: "int64", Value: 1}, {Type: "int64", Value: 1}},
	}
	asyncResult, err := server.SendTask(&addTask)
	if err != nil {
		return fmt.Errorf("could not send task: %w", err)
	}
	results, err := asyncResult.Get(wait)
	if err != nil {
		return fmt.Errorf("getting task result failed with error: %w", err)
	}
	log.INFO.Printf("1 + 1 = %v\n", tasks.HumanReadableResults(results))

	floats := tasks.Signature{
		Name: "sum_floats",
		Args: []tasks.Arg{{Type: "[]float64", Value: []float64{1.5, 2.7}}},
	}
	if asyncResult, err = server.SendTask(&floats); err != nil {
		return err
	}
	if results, err = asyncResult.Get(wait); err != nil {
		return err
	}
	log.INFO.Printf("sum([1.5, 2.7]) = %v\n", tasks.HumanReadableResults(results))

	// A group: its tasks run in parallel.
	group, err := tasks.NewGroup(
		&tasks.Signature{Name: "add", Args: []tasks.Arg{{Type: "int64", Value: 1}, {Type: "int64", Value: 1}}},
		&tasks.Signature{Name: "add", Args: []tasks.Arg{{Type: "int64", Value: 2}, {Type: "int64", Value: 2}}},
		&tasks.Signature{Name: "add", Args: []tasks.Arg{{Type: "int64", Value: 5}, {Type: "int64", Value: 6}}},
	)
	if err != nil {
		return err
	}
	asyncResults, err := server.SendGroup(group, 10)
	if err != nil {
		return fmt.Errorf("could not send group: %w", err)
	}
	for _, r := range asyncResults {
		results, err := r.Get(wait)
		if err != nil {
			return fmt.Errorf("getting task result failed with error: %w", err)
		}
		log.INFO.Printf("%v + %v = %v\n", r.Signature.Args[0].Value, r.Signature.Args[1].Value, tasks.HumanReadableResults(results))
	}

	// A chord: the group's results, in group order, are the callback's args.
	group, err = tasks.NewGroup(
		&tasks.Signature{Name: "add", Args: []tasks.Arg{{Type: "int64", Value: 1}, {Type: "int64", Value: 1}}},
		&tasks.Signature{Name: "add", Args: []tasks.Arg{{Type: "int64", Value: 2}, {Type: "int64", Value: 2}}},
		&tasks.Signature{Name: "add", Args: []tasks.Arg{{Type: "int64", Value: 5}, {Type: "int64", Value: 6}}},
	)
	if err != nil {
		return err
	}
	chord, err := tasks.NewChord(group, &tasks.Signature{Name: "multiply"})
	if err != nil {
		return err
	}
	chordResult, err := server.SendChord(chord, 10)
	if err != nil {
		return fmt.Errorf("could not send chord: %w", err)
	}
	if results, err = chordResult.Get(wait); err != nil {
		return fmt.Errorf("getting chord result failed with error: %w", err)
	}
	log.INFO.Printf("(1 + 1) * (2 + 2) * (5 + 6) = %v\n", tasks.HumanReadableResults(results))

	// A chain: each task's results are appended to the next one's args.
	chain, err := tasks.NewChain(
		&tasks.Signature{Name: "add", Args: []tasks.Arg{{Type: "int64", Value: 1}, {Type: "int64", Value: 1}}},
		&tasks.Signature{Name: "add", Args: []tasks.Arg{{Type: "int64", Value: 5}, {Type: "int64", Value: 5}}},
		&tasks.Signature{Name: "multiply", Args: []tasks.Arg{{Type: "int64", Value: 4}}},
	)
	if err != nil {
		return err
	}
	chainResult, err := server.SendChain(chain)
	if err != nil {
		return fmt.Errorf("could not send chain: %w", err)
	}
	if results, err = chainResult.Get(wait); err != nil {
		return fmt.Errorf("getting chain result failed with error: %w", err)
	}
	log.INFO.Printf("(1 + 1 + 5 + 5) * 4 = %v\n", tasks.HumanReadableResults(results))

	// A task whose function panics fails with the panic's error.
	if asyncResult, err = server.SendTask(&tasks.Signature{Name: "panic_task"}); err != nil {
		return err
	}
	if _, err = asyncResult.Get(wait); err == nil {
		return errors.New("panic_task did not fail")
	}
	log.INFO.Printf("Task panicked and returned error = %v\n", err)

	// A task that asks to run again later (ErrRetryTaskLater) until it
	// succeeds.
	if asyncResult, err = server.SendTask(&tasks.Signature{Name: "flaky"}); err != nil {
		return err
	}
	if results, err = asyncResult.GetWithTimeout(30*time.Second, wait); err != nil {
		return err
	}
	log.INFO.Printf("flaky returned %v\n", tasks.HumanReadableResults(results))

	// An ETA: the task runs no earlier than it.
	eta := time.Now().Add(200 * time.Millisecond)
	split := &tasks.Signature{Name: "split", ETA: &eta, Args: []tasks.Arg{{Type: "string", Value: "foo"}}}
	if asyncResult, err = server.SendTask(split); err != nil {
		return err
	}
	if results, err = asyncResult.Get(wait); err != nil {
		return err
	}
	log.INFO.Printf("split(\"foo\") = %v, run after its ETA\n", tasks.HumanReadableResults(results))

	pending, err := server.GetBroker().GetPendingTasks("")
	if err != nil {
		return err
	}
	log.INFO.Printf("%d tasks still pending\n", len(pending))
	return nil
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

// SumFloats returns the sum of numbers.
func SumFloats(numbers []float64) (float64, error) {
	var sum float64
	for _, n := range numbers {
		sum += n
	}
	return sum, nil
}

// Split returns the letters of s.
func Split(s string) ([]string, error) { return strings.Split(s, ""), nil }

// Concat joins strs.
func Concat(strs []string) (string, error) { return strings.Join(strs, ""), nil }

// PanicTask panics; the task fails with "oops".
func PanicTask() (string, error) { panic(errors.New("oops")) }

var flaky = struct {
	sync.Mutex
	runs map[string]int // by task UUID
}{runs: map[string]int{}}

// Flaky asks to run again 100 ms later (ErrRetryTaskLater) on its first two
// runs, then succeeds.
func Flaky(ctx context.Context) (string, error) {
	sig := tasks.SignatureFromContext(ctx)
	flaky.Lock()
	flaky.runs[sig.UUID]++
	n := flaky.runs[sig.UUID]
	flaky.Unlock()
	if n < 3 {
		return "", tasks.NewErrRetryTaskLater(fmt.Sprintf("run %d failed", n), 100*time.Millisecond)
	}
	return fmt.Sprintf("succeeded on run %d", n), nil
}

// LongRunner runs for a second, logging as it goes.
func LongRunner() error {
	for i := 0; i < 10; i++ {
		log.INFO.Print(i)
		time.Sleep(100 * time.Millisecond)
	}
	return nil
}
