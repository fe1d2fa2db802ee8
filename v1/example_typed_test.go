package machinery_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	machinery "github.com/b6192125/machinist/v1"
	"github.com/b6192125/machinist/v1/config"
)

// Resize is a typed task: the compiler checks its arguments where it is
// sent and its result where it is read.
var Resize = machinery.NewTask3("resize", func(ctx context.Context, id string, width int, crop bool) (string, error) {
	return fmt.Sprintf("https://cdn.example.com/%s-%d-%t.jpg", id, width, crop), nil
})

// Shout is a typed task whose result is a struct, carried as JSON.
var Shout = machinery.NewTask1("shout", func(ctx context.Context, s string) (Loud, error) {
	return Loud{Text: strings.ToUpper(s), Marks: 3}, nil
})

type Loud struct {
	Text  string
	Marks int
}

func ExampleNewTask3() {
	server, err := machinery.NewServer(&config.Config{Broker: "memory://", NoUnixSignals: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	defer server.Close()
	if err := server.Register(Resize, Shout); err != nil {
		panic(err)
	}
	worker := server.NewWorker("worker-1", 2)
	errs := make(chan error, 1)
	worker.LaunchAsync(errs)
	defer func() { worker.Quit(); <-errs }()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := Resize.Send(ctx, server, "img-1", 640, true)
	if err != nil {
		panic(err)
	}
	url, err := res.Get(ctx) // a string
	if err != nil {
		panic(err)
	}
	fmt.Println(url)

	loud, err := Shout.Send(ctx, server, "hello")
	if err != nil {
		panic(err)
	}
	l, err := loud.Get(ctx) // a Loud
	if err != nil {
		panic(err)
	}
	fmt.Println(l.Text, l.Marks)
	// Output:
	// https://cdn.example.com/img-1-640-true.jpg
	// HELLO 3
}
