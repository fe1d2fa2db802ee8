package machinery

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/b6192125/machinist/internal/service"
	brokers "github.com/b6192125/machinist/v1/brokers/iface"
	"github.com/b6192125/machinist/v1/tasks"
	"github.com/b6192125/machinist/v1/worker"
)

// Worker consumes tasks from a queue and runs them, Concurrency at a time.
// Make it with Server.NewWorker or NewCustomQueueWorker, set its handlers,
// then Launch it. Several workers may run on one Server.
type Worker struct {
	server      *Server
	ConsumerTag string
	Concurrency int
	Queue       string
	// Queues, when set, replaces Queue: the worker consumes every queue
	// named, each fetch trying them in a random order weighted by the
	// values (a queue of weight 3 comes first three times as often as one
	// of weight 1), or, with StrictPriority, always highest weight first,
	// so a lower queue runs only while every higher one is empty.
	Queues         map[string]int
	StrictPriority bool

	mu                sync.Mutex
	errorHandler      func(err error)
	preTaskHandler    func(*tasks.Signature)
	postTaskHandler   func(*tasks.Signature)
	preConsumeHandler func(*Worker) bool
	running           *worker.Worker     // the engine, from Run on (not on a broker written for machinery)
	processor         *worker.Worker     // the engine Process runs tasks on
	processCtx        context.Context    // their context, ended by an abrupt stop
	abortConsume      context.CancelFunc // ends processCtx
	stop              context.CancelFunc // stops Run gracefully; set once Run runs
	done              chan struct{}      // closed when Run returns
	launched          bool               // LaunchAsync was called
	started           chan struct{}      // closed once Run has begun fetching
	quit              bool
}

// Launch runs the worker until it stops, and returns why: nil after Quit or
// the broker's StopConsuming, ErrWorkerQuitGracefully or
// ErrWorkerQuitAbruptly after signals, or the error that stopped it.
func (w *Worker) Launch() error {
	errorsChan := make(chan error, 1)
	w.LaunchAsync(errorsChan)
	return <-errorsChan
}

// LaunchAsync starts the worker and returns at once; errorsChan receives one
// value when the worker stops: nil after a graceful Quit or the broker's
// StopConsuming, ErrWorkerQuitGracefully after a first SIGINT or SIGTERM
// (once running tasks have finished or been requeued),
// ErrWorkerQuitAbruptly after a second one, or the error that stopped it.
// Signals are not handled when the config's NoUnixSignals is set. As in
// machinery, the worker runs through the broker's StartConsuming.
func (w *Worker) LaunchAsync(errorsChan chan<- error) {
	w.mu.Lock()
	if w.stop != nil || w.launched || w.quit {
		launched := w.stop != nil || w.launched
		w.mu.Unlock()
		go func() {
			if launched {
				errorsChan <- ErrWorkerLaunched
			} else {
				errorsChan <- nil // Quit came first
			}
		}()
		return
	}
	w.launched = true
	w.mu.Unlock()

	var graceful atomic.Bool // the worker stops because of a first signal
	signals := &signalWatcher{
		graceful: func(sig os.Signal) {
			w.server.log.Warn("signal received; stopping gracefully (send another to stop at once)",
				slog.String("signal", sig.String()), slog.String("worker", w.ConsumerTag))
			graceful.Store(true)
			w.stopRun(false)
		},
		abrupt: func(sig os.Signal) {
			w.server.log.Warn("second signal received; stopping at once",
				slog.String("signal", sig.String()), slog.String("worker", w.ConsumerTag))
			w.stopRun(true)
		},
	}
	if !w.server.GetConfig().NoUnixSignals {
		// It runs while the worker does; Stop below ends it.
		_ = signals.Start(context.Background())
	}

	broker := w.server.GetBroker()
	consume := func() (bool, error) { return broker.StartConsuming(w.ConsumerTag, w.Concurrency, w) }
	if !isLeaseBroker(broker) {
		// A broker written for machinery: Run calls its StartConsuming.
		// Readied now, so that a StopConsuming from here on stops it.
		rearm(broker)
		consume = func() (bool, error) { return false, w.Run(context.Background()) }
	} else if c, ok := broker.(interface {
		Consumer(brokers.TaskProcessor) func() (bool, error)
	}); ok {
		// Registered as the broker's consumer now, so that a StopConsuming
		// right after LaunchAsync stops it.
		consume = c.Consumer(w)
	}
	go func() {
		_, err := consume()
		// Shutdown, in order: the worker has stopped (tasks finished or
		// requeued); signals are no longer ours; the caller is told why.
		signals.Stop()
		if err == nil && graceful.Load() {
			err = ErrWorkerQuitGracefully
		}
		errorsChan <- err
	}()
}

// Run runs the worker in the calling goroutine until ctx ends, Quit, or the
// broker's StopConsuming, then stops gracefully as Quit does and returns
// nil; or returns the error that stopped it (ErrWorkerQuitAbruptly after an
// abrupt stop). It handles no signals. A worker runs once: Run on a worker
// that ran or runs returns ErrWorkerLaunched.
func (w *Worker) Run(ctx context.Context) error {
	if err := w.server.invalid; err != nil {
		return err
	}
	w.mu.Lock()
	if w.stop != nil {
		w.mu.Unlock()
		return ErrWorkerLaunched
	}
	if w.quit {
		w.mu.Unlock()
		return nil
	}
	started := w.startedLocked()
	if broker := w.server.GetBroker(); !isLeaseBroker(broker) {
		if !w.launched {
			rearm(broker)
		}
		return w.consume(ctx, broker, started) // unlocks w.mu
	}
	m, err := w.server.migration()
	if err != nil {
		w.mu.Unlock()
		return err
	}
	engine := w.engine(func(p *worker.Params) {
		p.StartedFunc = func() { close(started) }
	})
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan struct{})
	defer close(done)
	w.running, w.stop, w.done = engine, stop, done
	queues, concurrency := w.queueNames(), w.concurrency()
	w.mu.Unlock()
	abort, aborted := context.WithCancel(context.WithoutCancel(ctx))
	defer aborted()
	var migrated chan struct{} // closed once the migration mode has stopped
	if m != nil {
		migrated = make(chan struct{})
		go func() {
			defer close(migrated)
			w.migrate(ctx, abort, m, queues, concurrency)
		}()
		go cancelAfter(ctx, migrated, w.server.GetConfig().ShutdownTimeout, aborted)
	}
	err = engine.Run(ctx)
	stop()
	if errors.Is(err, worker.ErrAborted) {
		aborted() // the machinery tasks running are cancelled too
		err = ErrWorkerQuitAbruptly
	}
	if migrated != nil {
		<-migrated
	}
	return err
}

// Started returns a channel closed once the worker runs: it has told the
// broker its task names and aggregators, so that tasks sent from then on
// are rerouted to it and aggregation members of its names are accepted, and
// it has begun fetching. While the broker cannot be reached the worker
// tries again, reporting each failure to the error handler, for up to a
// LeaseDuration; then it starts anyway and goes on trying every
// LeaseRenewInterval. A worker that never runs never closes it.
func (w *Worker) Started() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.startedLocked()
}

func (w *Worker) startedLocked() chan struct{} {
	if w.started == nil {
		w.started = make(chan struct{})
	}
	return w.started
}

// stopRun stops the running worker: gracefully, or, when abrupt, at once.
// Before Run, it keeps the worker from running.
func (w *Worker) stopRun(abrupt bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.stop == nil:
		w.quit = true
	case abrupt && w.running != nil:
		w.running.Abort()
	case abrupt && w.abortConsume != nil:
		w.abortConsume()
		w.stop()
	default:
		w.stop()
	}
}

// engine builds the worker engine from the current settings, changed by
// opts.
func (w *Worker) engine(opts ...func(*worker.Params)) *worker.Worker {
	s := w.server
	cnf := s.GetConfig()
	concurrency := w.concurrency()
	brokerName, backendName := s.names()
	p := worker.Params{
		Broker:           s.GetBroker(),
		Backend:          s.GetBackend(),
		BrokerName:       brokerName,
		BackendName:      backendName,
		Config:           cnf,
		Logger:           s.log,
		Tasks:            s,
		SendFunc:         s.sendCallback,
		PrepareFunc:      s.prepareCallback,
		Tracing:          s.tracing,
		Metrics:          s.metrics,
		ConsumerTag:      w.ConsumerTag,
		Concurrency:      concurrency,
		StrictPriority:   w.StrictPriority,
		ErrorHandlerFunc: w.errorHandler,
		PreTaskFunc:      w.preTaskHandler,
		PostTaskFunc:     w.postTaskHandler,
	}
	p.Queues = w.queueNames()
	if len(w.Queues) > 0 {
		for _, name := range p.Queues {
			p.Weights = append(p.Weights, w.Queues[name])
		}
	}
	if h := w.preConsumeHandler; h != nil {
		p.PreConsumeFunc = func() bool { return h(w) }
	}
	for _, o := range opts {
		o(&p)
	}
	return worker.New(p)
}

// concurrency is the worker's Concurrency, where below 1 means twice the
// number of CPUs.
func (w *Worker) concurrency() int {
	if w.Concurrency < 1 {
		return 2 * runtime.NumCPU()
	}
	return w.Concurrency
}

// queueNames returns the queues the worker consumes: Queues' names,
// sorted, else its one queue.
func (w *Worker) queueNames() []string {
	if len(w.Queues) > 0 {
		return sortedKeys(w.Queues)
	}
	return []string{w.queue()}
}

func sortedKeys(m map[string]int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func (w *Worker) queue() string {
	if w.Queue != "" {
		return w.Queue
	}
	return w.server.GetConfig().DefaultQueue
}

// Quit stops the worker gracefully and returns once it has stopped: it takes
// no more tasks, waits up to the config's ShutdownTimeout for running ones,
// then cancels and requeues the rest (in the migration mode, machinery's
// tasks are cancelled and given 5 s more, then left running: they cannot
// be requeued without running twice). On a broker written for machinery it
// calls the broker's StopConsuming, which decides how long to wait. Safe
// to call more than once, before Launch (the worker then never runs) and
// from any goroutine.
func (w *Worker) Quit() {
	w.mu.Lock()
	w.quit = true
	stop, done := w.stop, w.done
	w.mu.Unlock()
	if stop == nil {
		return
	}
	stop()
	<-done
}

// Process runs one task to the end in the calling goroutine, as machinery's
// Worker.Process does: states are written and callbacks and retries are
// sent. Eager mode runs every task this way.
func (w *Worker) Process(signature *tasks.Signature) error {
	w.mu.Lock()
	engine, ctx := w.processor, w.processCtx
	if engine == nil {
		engine, ctx = w.engine(), context.Background()
	}
	w.mu.Unlock()
	return engine.Process(ctx, signature)
}

// CustomQueue returns the worker's queue setting ("" means the DefaultQueue).
func (w *Worker) CustomQueue() string { return w.Queue }

// GetServer returns the worker's Server.
func (w *Worker) GetServer() *Server { return w.server }

// SetErrorHandler sets a function called with the error of each task that
// fails for good and with broker errors the worker recovers from.
func (w *Worker) SetErrorHandler(handler func(err error)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.errorHandler = handler
}

// SetPreTaskHandler sets a function called just before each task runs.
func (w *Worker) SetPreTaskHandler(handler func(*tasks.Signature)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.preTaskHandler = handler
}

// SetPostTaskHandler sets a function called after each task runs, whatever
// its outcome.
func (w *Worker) SetPostTaskHandler(handler func(*tasks.Signature)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.postTaskHandler = handler
}

// SetPreConsumeHandler sets a function that gates fetching: while it returns
// false the worker takes no tasks.
func (w *Worker) SetPreConsumeHandler(handler func(*Worker) bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.preConsumeHandler = handler
}

// PreConsumeHandler reports what the pre-consume handler says now (true
// when there is none).
func (w *Worker) PreConsumeHandler() bool {
	w.mu.Lock()
	h := w.preConsumeHandler
	w.mu.Unlock()
	return h == nil || h(w)
}

// signalWatcher turns SIGINT and SIGTERM into a worker's stop: the first
// into a graceful one, the next into an abrupt one. It is a
// service.Service: Start makes the process's signals its own until Stop.
type signalWatcher struct {
	service.Base
	graceful, abrupt func(os.Signal)
}

// Start begins watching for signals.
func (s *signalWatcher) Start(ctx context.Context) error {
	ctx, shouldStart, stopped, err := s.StartInit(ctx)
	if !shouldStart {
		return err
	}
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		defer close(stopped)
		defer signal.Stop(sigs)
		received := 0
		for {
			select {
			case <-ctx.Done():
				return
			case sig := <-sigs:
				received++
				if received == 1 {
					s.graceful(sig)
				} else {
					s.abrupt(sig)
				}
			}
		}
	}()
	return nil
}
