// Command hello is the README's quick start: one task, sent and run in one
// process, on the in-process memory broker.
//
//	go run ./example/hello
//
// README.md shows this file from its package clause on; a test in v1
// (TestREADMEGoBlocksAreTestedCode) keeps the two the same.
package main

import (
	"fmt"
	"time"

	"github.com/b6192125/machinist/v1" // package machinery, as in machinery v1
	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/tasks"
)

func main() {
	server, err := machinery.NewServer(&config.Config{Broker: "memory://"}) // in-process broker and backend
	if err != nil {
		panic(err)
	}
	defer server.Close()
	server.RegisterTask("add", func(args ...int64) (int64, error) {
		var sum int64
		for _, a := range args {
			sum += a
		}
		return sum, nil
	})

	worker := server.NewWorker("worker-1", 10)
	go worker.Launch()
	defer worker.Quit()

	res, err := server.SendTask(&tasks.Signature{
		Name: "add",
		Args: []tasks.Arg{{Type: "int64", Value: 1}, {Type: "int64", Value: 2}},
	})
	if err != nil {
		panic(err)
	}
	values, err := res.Get(5 * time.Millisecond)
	if err != nil {
		panic(err)
	}
	fmt.Println(tasks.HumanReadableResults(values)) // 3
}
