// Command telemetry runs machinist with OpenTelemetry: traces go to stdout
// (and to an OTLP collector such as Jaeger when OTEL_EXPORTER_OTLP_ENDPOINT
// is set), metrics to Prometheus through the OpenTelemetry Prometheus
// exporter on /metrics. It sends a chord (four members, then a callback
// that adds their results) and a task that is retried once, so that the
// trace of a whole workflow and the task metrics can be seen.
//
// It is a module of its own (its exporters stay out of the library's
// dependencies); run it from its directory:
//
//	cd example/telemetry
//	go run .                    # once, traces on stdout
//	go run . -serve :2112       # then keeps /metrics up
//
// With Jaeger and Prometheus (docker compose --profile telemetry up -d):
//
//	OTEL_EXPORTER_OTLP_ENDPOINT=http://localhost:4318 go run . -serve :2112 -every 2s
//
// then open Jaeger at http://localhost:16686 and Prometheus at
// http://localhost:9090. BROKER and RESULT_BACKEND choose Redis, as in the
// quick start; with BROKER unset it chooses the in-process broker.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/b6192125/machinist/v1"
	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/tasks"
)

func main() {
	serve := flag.String("serve", "", "after the workflows, serve /metrics on this address until interrupted (e.g. :2112)")
	every := flag.Duration("every", 0, "with -serve, send the workflows again at this interval")
	quiet := flag.Bool("quiet", false, "do not print the spans")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	spans := io.Writer(os.Stdout)
	if *quiet {
		spans = io.Discard
	}
	if err := run(ctx, options{spans: spans, serve: *serve, every: *every}); err != nil {
		log.Fatal(err)
	}
}

type options struct {
	spans io.Writer     // where the stdout exporter writes
	serve string        // the /metrics address, or "" to stop after one round
	every time.Duration // with serve, how often to send the workflows again
	// listening, when set, receives the /metrics listener's address.
	listening func(addr string)
}

func run(ctx context.Context, o options) error {
	res := resource.NewSchemaless(semconv.ServiceName("machinist-telemetry-example"))

	// Traces: printed, and sent to a collector when the standard
	// OTEL_EXPORTER_OTLP_* variables name one.
	stdoutExp, err := stdouttrace.New(stdouttrace.WithWriter(o.spans), stdouttrace.WithPrettyPrint())
	if err != nil {
		return err
	}
	tpOpts := []sdktrace.TracerProviderOption{sdktrace.WithResource(res), sdktrace.WithBatcher(stdoutExp)}
	if os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "" {
		otlpExp, err := otlptracehttp.New(ctx)
		if err != nil {
			return err
		}
		tpOpts = append(tpOpts, sdktrace.WithBatcher(otlpExp))
	}
	tp := sdktrace.NewTracerProvider(tpOpts...)
	defer func() { _ = tp.Shutdown(context.Background()) }()

	// Metrics: a Prometheus registry of our own, served on /metrics.
	registry := prometheus.NewRegistry()
	promExp, err := otelprom.New(otelprom.WithRegisterer(registry))
	if err != nil {
		return err
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithResource(res), sdkmetric.WithReader(promExp))
	defer func() { _ = mp.Shutdown(context.Background()) }()

	cnf, err := config.NewFromEnvironment()
	if err != nil {
		return err
	}
	if cnf.Broker == "" {
		// NewServer refuses an unset Broker; this program runs whole in
		// one process, so the in-process broker serves it.
		cnf.Broker = "memory://"
	}
	cnf.NoUnixSignals = true
	cnf.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	// The providers could be set globally instead (otel.SetTracerProvider,
	// otel.SetMeterProvider, otel.SetTextMapPropagator).
	cnf.TracerProvider = tp
	cnf.MeterProvider = mp
	cnf.Propagator = propagation.TraceContext{}
	server, err := machinery.NewServer(cnf)
	if err != nil {
		return err
	}
	defer server.Close()

	var mu sync.Mutex
	tried := map[string]bool{}
	if err := server.RegisterTasks(map[string]interface{}{
		"square": func(x int64) (int64, error) { return x * x, nil },
		"sum": func(xs ...int64) (int64, error) {
			var n int64
			for _, x := range xs {
				n += x
			}
			return n, nil
		},
		// flaky fails its first attempt: its trace shows two attempts
		// under one send, the first with status Error and a retry event.
		"flaky": func(ctx context.Context) (string, error) {
			id := tasks.SignatureFromContext(ctx).UUID
			mu.Lock()
			defer mu.Unlock()
			if !tried[id] {
				tried[id] = true
				return "", tasks.NewErrRetryTaskLater("not yet", 100*time.Millisecond)
			}
			return "done", nil
		},
	}); err != nil {
		return err
	}
	worker := server.NewWorker("telemetry-example", 4)
	errs := make(chan error, 1)
	worker.LaunchAsync(errs)
	defer func() {
		worker.Quit()
		<-errs
	}()
	<-worker.Started()

	if err := round(ctx, server); err != nil {
		return err
	}
	if o.serve == "" {
		return nil
	}

	ln, err := net.Listen("tcp", o.serve)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(registry, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	fmt.Fprintf(os.Stderr, "metrics on http://%s/metrics; interrupt to stop\n", ln.Addr())
	if o.listening != nil {
		o.listening(ln.Addr().String())
	}
	var tick <-chan time.Time
	if o.every > 0 {
		t := time.NewTicker(o.every)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick:
			if err := round(ctx, server); err != nil {
				return err
			}
		}
	}
}

// round sends the chord and the flaky task and waits for their results.
func round(ctx context.Context, server *machinery.Server) error {
	var members []*tasks.Signature
	for i := int64(1); i <= 4; i++ {
		members = append(members, &tasks.Signature{Name: "square", Args: []tasks.Arg{{Type: "int64", Value: i}}})
	}
	group, err := tasks.NewGroup(members...)
	if err != nil {
		return err
	}
	chord, err := tasks.NewChord(group, &tasks.Signature{Name: "sum"})
	if err != nil {
		return err
	}
	chordResult, err := server.SendChordWithContext(ctx, chord, 0)
	if err != nil {
		return err
	}
	flaky, err := server.SendTaskWithContext(ctx, &tasks.Signature{Name: "flaky"})
	if err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	sum, err := chordResult.GetWithContext(wctx, 5*time.Millisecond)
	if err != nil {
		return fmt.Errorf("chord: %w", err)
	}
	out, err := flaky.GetWithContext(wctx, 5*time.Millisecond)
	if err != nil {
		return fmt.Errorf("flaky: %w", err)
	}
	if len(sum) != 1 || len(out) != 1 {
		return errors.New("unexpected results")
	}
	fmt.Fprintf(os.Stderr, "chord: 1+4+9+16 = %v; flaky: %v\n", sum[0].Interface(), out[0].Interface())
	return nil
}
