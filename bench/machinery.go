package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	stdlog "log"
	"reflect"
	"time"

	machinery "github.com/RichardKnop/machinery/v2"
	backendsiface "github.com/RichardKnop/machinery/v2/backends/iface"
	nullbackend "github.com/RichardKnop/machinery/v2/backends/null"
	redisbackend "github.com/RichardKnop/machinery/v2/backends/redis"
	brokersiface "github.com/RichardKnop/machinery/v2/brokers/iface"
	redisbroker "github.com/RichardKnop/machinery/v2/brokers/redis"
	"github.com/RichardKnop/machinery/v2/config"
	eagerlock "github.com/RichardKnop/machinery/v2/locks/eager"
	machinerylog "github.com/RichardKnop/machinery/v2/log"
	"github.com/RichardKnop/machinery/v2/tasks"
	goredis "github.com/redis/go-redis/v9"
)

func init() {
	// machinery logs through package-level loggers; silence them all.
	machinerylog.Set(stdlog.New(io.Discard, "", 0))
}

// machineryDriver runs machinery v2 on its go-redis broker (NewGR), with
// its go-redis result backend (results) or its null backend (!results).
// Settings are the loaders' defaults: ResultsExpireIn 3600, normal tasks
// polled with BLPOP of 1 s, delayed tasks polled every 500 ms.
type machineryDriver struct {
	results  bool
	addr     string
	cnf      *config.Config
	server   *machinery.Server
	broker   brokersiface.Broker
	client   *goredis.Client // for Outstanding
	consumed bool            // a worker ran: its Quit closed the broker's client
}

var _ Driver = (*machineryDriver)(nil)

func (d *machineryDriver) Name() string {
	if d.results {
		return "machinery"
	}
	return "machinery-null"
}

// queue and delayedKey differ between the two configurations so that the
// crash workload can run them side by side on one Redis.
func (d *machineryDriver) queue() string {
	if d.results {
		return "machinery_tasks"
	}
	return "machinery_null_tasks"
}

func (d *machineryDriver) delayedKey() string {
	if d.results {
		return "delayed_tasks"
	}
	return "delayed_tasks_null"
}

func (d *machineryDriver) Open(ctx context.Context, addr string, h Handlers) error {
	d.addr = addr
	d.cnf = &config.Config{
		Broker:          "redis://" + addr,
		DefaultQueue:    d.queue(),
		ResultBackend:   "redis://" + addr,
		ResultsExpireIn: config.DefaultResultsExpireIn,
		NoUnixSignals:   true, // this program handles Ctrl-C itself
		Redis: &config.RedisConfig{ // the loaders' defaults
			MaxIdle:                3,
			IdleTimeout:            240,
			ReadTimeout:            15,
			WriteTimeout:           15,
			ConnectTimeout:         15,
			NormalTasksPollPeriod:  1000,
			DelayedTasksPollPeriod: 500,
			DelayedTasksKey:        d.delayedKey(),
		},
	}
	d.broker = redisbroker.NewGR(d.cnf, []string{addr}, 0)
	var backend backendsiface.Backend
	if d.results {
		backend = redisbackend.NewGR(d.cnf, []string{addr}, 0)
	} else {
		d.cnf.ResultBackend = ""
		backend = nullbackend.New()
	}
	d.server = machinery.NewServer(d.cnf, d.broker, backend, eagerlock.New())
	for name, fn := range h {
		var taskFunc interface{}
		if name == taskNoop {
			taskFunc = func() error { _, err := fn(nil); return err }
		} else {
			taskFunc = func(args ...int64) (int64, error) { return fn(args) }
		}
		if err := d.server.RegisterTask(name, taskFunc); err != nil {
			return err
		}
	}
	d.client = goredis.NewClient(&goredis.Options{Addr: addr, PoolSize: 2})
	return nil
}

func (d *machineryDriver) Close() {
	if d.broker != nil && !d.consumed {
		d.broker.StopConsuming() // closes the broker's client
	}
	if d.client != nil {
		d.client.Close()
	}
	// machinery's go-redis backend has no Close: its client stays open
	// (idle) until the process exits.
}

func machinerySignature(t Task) *tasks.Signature {
	sig := &tasks.Signature{Name: t.Name}
	for _, a := range t.Args {
		sig.Args = append(sig.Args, tasks.Arg{Type: "int64", Value: a})
	}
	if !t.ETA.IsZero() {
		eta := t.ETA
		sig.ETA = &eta
	}
	return sig
}

func (d *machineryDriver) Send(ctx context.Context, t Task) error {
	_, err := d.server.SendTaskWithContext(ctx, machinerySignature(t))
	return err
}

// SendBulk sends ts as one group (SendGroup, no send-concurrency limit):
// machinery has no bulk publish, a group is its way to send many tasks at
// once.
func (d *machineryDriver) SendBulk(ctx context.Context, ts []Task) error {
	sigs := make([]*tasks.Signature, len(ts))
	for i, t := range ts {
		sigs[i] = machinerySignature(t)
	}
	group, err := tasks.NewGroup(sigs...)
	if err != nil {
		return err
	}
	_, err = d.server.SendGroupWithContext(ctx, group, 0)
	return err
}

func (d *machineryDriver) StartWorker(concurrency int) (func(), error) {
	w := d.server.NewWorker("bench", concurrency)
	errs := make(chan error, 1)
	w.LaunchAsync(errs)
	d.consumed = true
	return func() {
		w.Quit()
		select {
		case <-errs:
		case <-time.After(10 * time.Second):
		}
	}, nil
}

func (d *machineryDriver) Chord(ctx context.Context, members [][]int64) (int64, error) {
	if !d.results {
		return 0, fmt.Errorf("%w: the null backend keeps no results (and fires the callback once per member)", errNA)
	}
	sigs := make([]*tasks.Signature, len(members))
	for i, args := range members {
		sigs[i] = machinerySignature(Task{Name: taskAdd, Args: args})
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
	// machinery's Get polls forever; GetWithTimeout keeps the run bounded
	// (and returns nil, nil for some errors: see machineryInt).
	return machineryInt(res.GetWithTimeout(timeLeft(ctx), resultPoll))
}

func (d *machineryDriver) Chain(ctx context.Context, steps [][]int64) (int64, error) {
	if !d.results {
		return 0, fmt.Errorf("%w: the null backend keeps no results", errNA)
	}
	sigs := make([]*tasks.Signature, len(steps))
	for i, args := range steps {
		sigs[i] = machinerySignature(Task{Name: taskAdd, Args: args})
	}
	chain, err := tasks.NewChain(sigs...)
	if err != nil {
		return 0, err
	}
	res, err := d.server.SendChainWithContext(ctx, chain)
	if err != nil {
		return 0, err
	}
	return machineryInt(res.GetWithTimeout(timeLeft(ctx), resultPoll))
}

// Outstanding counts the queue's list and the delayed-task zset: machinery
// keeps no record of tasks a worker has popped.
func (d *machineryDriver) Outstanding(ctx context.Context) (int, error) {
	pipe := d.client.Pipeline()
	l := pipe.LLen(ctx, d.queue())
	z := pipe.ZCard(ctx, d.delayedKey())
	if _, err := pipe.Exec(ctx); err != nil {
		return 0, err
	}
	return int(l.Val() + z.Val()), nil
}

// errMachineryNoResult is what a nil, nil from machinery's GetWithTimeout
// means: it swallowed an error.
var errMachineryNoResult = errors.New("machinery returned no result and no error")

func machineryInt(vals []reflect.Value, err error) (int64, error) {
	if err != nil {
		return 0, err
	}
	if len(vals) != 1 {
		return 0, errMachineryNoResult
	}
	return vals[0].Int(), nil
}

// timeLeft is the time until ctx's deadline (a minute when it has none).
func timeLeft(ctx context.Context) time.Duration {
	if dl, ok := ctx.Deadline(); ok {
		return time.Until(dl)
	}
	return time.Minute
}
