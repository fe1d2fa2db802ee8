package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"time"

	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	machinist "github.com/b6192125/machinist/v1"
	brokers "github.com/b6192125/machinist/v1/brokers/iface"
	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/tasks"
)

// machinistDriver runs machinist with its defaults: the Redis broker and
// the Redis result backend on the same URL (results stored), leases of 10 s.
type machinistDriver struct {
	server      *machinist.Server
	aggregating bool // StartWorker waits until the worker announced its aggregator
	// otel runs it with the OpenTelemetry SDK: spans batched to an
	// exporter that drops them, metrics aggregated for a reader.
	otel     bool
	shutdown []func(context.Context) error
}

var (
	_ Driver            = (*machinistDriver)(nil)
	_ AggregatingDriver = (*machinistDriver)(nil)
)

func (d *machinistDriver) Name() string {
	if d.otel {
		return "machinist-otel"
	}
	return "machinist"
}

// discardSpans is a span exporter that drops what it is given.
type discardSpans struct{}

func (discardSpans) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discardSpans) Shutdown(context.Context) error                             { return nil }

func (d *machinistDriver) Open(ctx context.Context, addr string, h Handlers) error {
	return d.open(addr, h, nil)
}

// OpenAggregating registers an aggregator of taskMember with agg's policy
// that sends the members' arguments as one taskBatch.
func (d *machinistDriver) OpenAggregating(ctx context.Context, addr string, h Handlers, agg Aggregation) error {
	return d.open(addr, h, &agg)
}

func (d *machinistDriver) open(addr string, h Handlers, agg *Aggregation) error {
	cnf := &config.Config{
		Broker:        "redis://" + addr,
		NoUnixSignals: true, // this program handles Ctrl-C itself
		Logger:        slog.New(slog.DiscardHandler),
	}
	if d.otel {
		tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(discardSpans{}))
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
		cnf.TracerProvider, cnf.MeterProvider, cnf.Propagator = tp, mp, propagation.TraceContext{}
		d.shutdown = append(d.shutdown, tp.Shutdown, mp.Shutdown)
	}
	s, err := machinist.NewServer(cnf)
	if err != nil {
		return err
	}
	for name, fn := range h {
		var taskFunc interface{}
		if name == taskNoop {
			taskFunc = func() error { _, err := fn(nil); return err }
		} else {
			taskFunc = func(args ...int64) (int64, error) { return fn(args) }
		}
		if err := s.RegisterTask(name, taskFunc); err != nil {
			s.Close()
			return err
		}
	}
	if agg != nil {
		policy := machinist.AggregationPolicy{MaxSize: agg.MaxSize, MaxDelay: agg.MaxDelay, GracePeriod: agg.GracePeriod}
		err := s.RegisterAggregator(taskMember, policy, func(ctx context.Context, key string, members []*tasks.Signature) (*tasks.Signature, error) {
			batch := &tasks.Signature{Name: taskBatch}
			for _, m := range members {
				batch.Args = append(batch.Args, m.Args...)
			}
			return batch, nil
		})
		if err != nil {
			s.Close()
			return err
		}
		d.aggregating = true
	}
	d.server = s
	return nil
}

func (d *machinistDriver) Close() {
	if d.server != nil {
		d.server.Close()
	}
	for _, f := range d.shutdown {
		_ = f(context.Background())
	}
	d.shutdown = nil
}

func machinistSignature(t Task) *tasks.Signature {
	sig := &tasks.Signature{Name: t.Name}
	for _, a := range t.Args {
		sig.Args = append(sig.Args, tasks.Arg{Type: "int64", Value: a})
	}
	if !t.ETA.IsZero() {
		eta := t.ETA
		sig.ETA = &eta
	}
	sig.AggregationKey = t.Group
	return sig
}

func (d *machinistDriver) Send(ctx context.Context, t Task) error {
	_, err := d.server.SendTaskWithContext(ctx, machinistSignature(t))
	return err
}

// SendBulk sends ts as one group: the group is recorded, the states are
// written in one call and the tasks published in batches of 1000.
func (d *machinistDriver) SendBulk(ctx context.Context, ts []Task) error {
	sigs := make([]*tasks.Signature, len(ts))
	for i, t := range ts {
		sigs[i] = machinistSignature(t)
	}
	group, err := tasks.NewGroup(sigs...)
	if err != nil {
		return err
	}
	_, err = d.server.SendGroupWithContext(ctx, group, 0)
	return err
}

// SendBatch sends ts with SendTasks.
func (d *machinistDriver) SendBatch(ctx context.Context, ts []Task) error {
	sigs := make([]*tasks.Signature, len(ts))
	for i, t := range ts {
		sigs[i] = machinistSignature(t)
	}
	_, err := d.server.SendTasks(ctx, sigs)
	return err
}

func (d *machinistDriver) StartWorker(concurrency int) (func(), error) {
	w := d.server.NewWorker("bench", concurrency)
	errs := make(chan error, 1)
	w.LaunchAsync(errs)
	stop := func() {
		w.Quit()
		<-errs
	}
	if !d.aggregating {
		return stop, nil
	}
	// Members are refused until a worker has announced its aggregator.
	t := time.NewTimer(15 * time.Second)
	defer t.Stop()
	select {
	case <-w.Started():
		return stop, nil
	case err := <-errs:
		return nil, fmt.Errorf("worker stopped before it started: %w", err)
	case <-t.C:
		stop()
		return nil, errors.New("worker did not start in 15 s")
	}
}

func (d *machinistDriver) Chord(ctx context.Context, members [][]int64) (int64, error) {
	sigs := make([]*tasks.Signature, len(members))
	for i, args := range members {
		sigs[i] = machinistSignature(Task{Name: taskAdd, Args: args})
	}
	group, err := tasks.NewGroup(sigs...)
	if err != nil {
		return 0, err
	}
	chord, err := tasks.NewChord(group, &tasks.Signature{Name: taskSum})
	if err != nil {
		return 0, err
	}
	res, err := d.server.SendChordWithContext(ctx, chord, 0)
	if err != nil {
		return 0, err
	}
	return machinistInt(res.GetWithContext(ctx, resultPoll))
}

func (d *machinistDriver) Chain(ctx context.Context, steps [][]int64) (int64, error) {
	sigs := make([]*tasks.Signature, len(steps))
	for i, args := range steps {
		sigs[i] = machinistSignature(Task{Name: taskAdd, Args: args})
	}
	chain, err := tasks.NewChain(sigs...)
	if err != nil {
		return 0, err
	}
	res, err := d.server.SendChainWithContext(ctx, chain)
	if err != nil {
		return 0, err
	}
	return machinistInt(res.GetWithContext(ctx, resultPoll))
}

func (d *machinistDriver) Outstanding(ctx context.Context) (int, error) {
	qi, err := d.server.GetBroker().(brokers.Inspector).QueueInfo(ctx, config.DefaultQueueName)
	if err != nil {
		return 0, err
	}
	return qi.Pending + qi.Active + qi.Scheduled + qi.Retry, nil
}

// resultPoll is the sleep between result polls for the libraries whose
// AsyncResult.Get polls (machinist and machinery), the same for both.
const resultPoll = 5 * time.Millisecond

func machinistInt(vals []reflect.Value, err error) (int64, error) {
	if err != nil {
		return 0, err
	}
	if len(vals) != 1 {
		return 0, fmt.Errorf("want one result, got %d", len(vals))
	}
	return vals[0].Int(), nil
}

// machinistIdleWorker starts the idle workload's server: the Redis broker
// and result backend at addr, the other settings their defaults, and one
// worker of concurrency idleConcurrency on queues (weight 1 each). fetching
// is called before every fetch. stop quits the worker and closes the
// server; failed receives why the worker stopped if it stops by itself.
func machinistIdleWorker(addr string, queues []string, fetching func()) (stop func(), failed <-chan error, err error) {
	url := "redis://" + addr
	s, err := machinist.NewServer(&config.Config{
		Broker:        url,
		ResultBackend: url,
		NoUnixSignals: true, // the worker process handles SIGTERM itself
		Logger:        slog.New(slog.DiscardHandler),
	})
	if err != nil {
		return nil, nil, fmt.Errorf("machinist server: %w", err)
	}
	if err := s.RegisterTask(taskNoop, func() error { return nil }); err != nil {
		s.Close()
		return nil, nil, fmt.Errorf("register %s: %w", taskNoop, err)
	}
	weights := make(map[string]int, len(queues))
	for _, q := range queues {
		weights[q] = 1
	}
	w := s.NewQueuesWorker("bench-idle", idleConcurrency, weights, false)
	w.SetPreConsumeHandler(func(*machinist.Worker) bool {
		fetching()
		return true
	})
	errs := make(chan error, 1)
	w.LaunchAsync(errs)
	return func() {
		w.Quit()
		<-errs
		s.Close()
	}, errs, nil
}
