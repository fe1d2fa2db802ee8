package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/hibiken/asynq"
)

// asynqDriver runs asynq with its defaults: queue "default", no result
// retention, lease 30 s, 1 s idle task check, 5 s scheduled-task check.
type asynqDriver struct {
	opt       asynq.RedisClientOpt
	client    *asynq.Client
	inspector *asynq.Inspector
	handlers  Handlers
	agg       *Aggregation // set by OpenAggregating
}

var (
	_ Driver            = (*asynqDriver)(nil)
	_ AggregatingDriver = (*asynqDriver)(nil)
)

// nopLogger silences asynq.
type nopLogger struct{}

func (nopLogger) Debug(...interface{}) {}
func (nopLogger) Info(...interface{})  {}
func (nopLogger) Warn(...interface{})  {}
func (nopLogger) Error(...interface{}) {}
func (nopLogger) Fatal(...interface{}) {}

func (d *asynqDriver) Name() string { return "asynq" }

func (d *asynqDriver) Open(ctx context.Context, addr string, h Handlers) error {
	d.opt = asynq.RedisClientOpt{Addr: addr}
	d.client = asynq.NewClient(d.opt)
	d.inspector = asynq.NewInspector(d.opt)
	d.handlers = h
	return d.client.Ping()
}

// OpenAggregating has the servers started later aggregate each asynq.Group
// with agg's GroupMaxSize, GroupMaxDelay and GroupGracePeriod, concatenating
// the members' payloads into one taskBatch. asynq looks for due groups
// every min(GroupGracePeriod, 7 s), and GroupGracePeriod is at least 1 s.
func (d *asynqDriver) OpenAggregating(ctx context.Context, addr string, h Handlers, agg Aggregation) error {
	d.agg = &agg
	return d.Open(ctx, addr, h)
}

func (d *asynqDriver) Close() {
	if d.client != nil {
		d.client.Close()
	}
	if d.inspector != nil {
		d.inspector.Close()
	}
}

func (d *asynqDriver) Send(ctx context.Context, t Task) error {
	var opts []asynq.Option
	if !t.ETA.IsZero() {
		opts = append(opts, asynq.ProcessAt(t.ETA))
	}
	if t.Group != "" {
		opts = append(opts, asynq.Group(t.Group))
	}
	_, err := d.client.EnqueueContext(ctx, asynq.NewTask(t.Name, encodeArgs(t.Args)), opts...)
	return err
}

// SendBulk: asynq has no bulk enqueue.
func (d *asynqDriver) SendBulk(ctx context.Context, ts []Task) error {
	return fmt.Errorf("%w: asynq has no bulk enqueue", errNA)
}

func (d *asynqDriver) StartWorker(concurrency int) (func(), error) {
	cfg := asynq.Config{
		Concurrency: concurrency,
		Logger:      nopLogger{},
		LogLevel:    asynq.FatalLevel,
	}
	if d.agg != nil {
		cfg.GroupMaxSize = d.agg.MaxSize
		cfg.GroupMaxDelay = d.agg.MaxDelay
		cfg.GroupGracePeriod = d.agg.GracePeriod
		cfg.GroupAggregator = asynq.GroupAggregatorFunc(func(group string, members []*asynq.Task) *asynq.Task {
			var payload []byte
			for _, m := range members {
				payload = append(payload, m.Payload()...)
			}
			return asynq.NewTask(taskBatch, payload)
		})
	}
	srv := asynq.NewServer(d.opt, cfg)
	mux := asynq.NewServeMux()
	for name, fn := range d.handlers {
		mux.HandleFunc(name, func(ctx context.Context, t *asynq.Task) error {
			args, err := decodeArgs(t.Payload())
			if err != nil {
				return err
			}
			_, err = fn(args)
			return err
		})
	}
	if err := srv.Start(mux); err != nil {
		return nil, err
	}
	return srv.Shutdown, nil
}

// Chord: asynq has no workflows.
func (d *asynqDriver) Chord(ctx context.Context, members [][]int64) (int64, error) {
	return 0, errNoWorkflows
}

// Chain: asynq has no workflows.
func (d *asynqDriver) Chain(ctx context.Context, steps [][]int64) (int64, error) {
	return 0, errNoWorkflows
}

var errNoWorkflows = fmt.Errorf("%w: asynq has no workflows", errNA)

func (d *asynqDriver) Outstanding(ctx context.Context) (int, error) {
	qi, err := d.inspector.GetQueueInfo("default")
	if errors.Is(err, asynq.ErrQueueNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return qi.Pending + qi.Active + qi.Scheduled + qi.Retry, nil
}

// asynqIdleWorker starts the idle workload's server: asynq.NewServer at
// addr with Queues (weight 1 each), concurrency idleConcurrency, the other
// settings their defaults. fetching is called once the server has started
// (its processor then fetches at once). failed never receives: asynq does
// not say when its server stops by itself.
func asynqIdleWorker(addr string, queues []string, fetching func()) (stop func(), failed <-chan error, err error) {
	weights := make(map[string]int, len(queues))
	for _, q := range queues {
		weights[q] = 1
	}
	srv := asynq.NewServer(asynq.RedisClientOpt{Addr: addr}, asynq.Config{
		Concurrency: idleConcurrency,
		Queues:      weights,
		Logger:      nopLogger{},
		LogLevel:    asynq.FatalLevel,
	})
	mux := asynq.NewServeMux()
	mux.HandleFunc(taskNoop, func(context.Context, *asynq.Task) error { return nil })
	if err := srv.Start(mux); err != nil {
		return nil, nil, fmt.Errorf("start asynq server: %w", err)
	}
	fetching()
	return srv.Shutdown, nil, nil
}
