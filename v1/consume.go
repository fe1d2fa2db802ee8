package machinery

import (
	"context"
	"fmt"
	"log/slog"

	brokers "github.com/b6192125/machinist/v1/brokers/iface"
)

func isLeaseBroker(b brokers.Broker) bool {
	_, ok := b.(brokers.LeaseBroker)
	return ok
}

// rearm readies broker, if StopConsuming stopped it, to consume again (a
// broker on common.Broker; machinery's own stay stopped).
func rearm(broker brokers.Broker) {
	if r, ok := broker.(interface{ RearmConsuming() }); ok {
		r.RearmConsuming()
	}
}

// consume runs the worker on broker, written for machinery, as machinery's
// worker does: broker's StartConsuming hands it tasks, which Process runs,
// and is called again while it asks to be (retry), until ctx ends, the
// worker is stopped (both call broker.StopConsuming) or StopConsuming is
// called. An abrupt stop cancels the tasks' contexts and returns
// ErrWorkerQuitAbruptly at once, as machinery's second signal does. Called
// by Run with w.mu held, which it releases.
func (w *Worker) consume(ctx context.Context, broker brokers.Broker, started chan struct{}) error {
	if w.server.GetConfig().MachineryBroker != "" || len(w.Queues) > 0 {
		w.server.log.Warn("MachineryBroker and Worker.Queues are not used on a broker written for machinery",
			slog.String("worker", w.ConsumerTag), slog.String("broker", fmt.Sprintf("%T", broker)))
	}
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan struct{})
	defer close(done)
	processCtx, abort := context.WithCancel(context.Background())
	w.stop, w.done = stop, done
	w.processor, w.processCtx, w.abortConsume = w.engine(), processCtx, abort
	w.mu.Unlock()
	// The stop channel this worker was launched with: once it is closed
	// the worker is done, even if another worker re-arms the broker.
	var stopped chan int
	if s, ok := broker.(interface{ GetStopChan() chan int }); ok {
		stopped = s.GetStopChan()
	}
	loopDone := make(chan struct{}) // closed when consumeLoop has returned
	go func() {
		select {
		case <-ctx.Done():
			select {
			case <-loopDone: // stopped of its own accord: others may still run
			default:
				broker.StopConsuming()
			}
		case <-loopDone:
		}
	}()
	close(started)
	result := make(chan error, 1)
	go func() {
		err := w.consumeLoop(ctx, broker, stopped)
		close(loopDone)
		result <- err
	}()
	select {
	case err := <-result:
		return err
	case <-processCtx.Done():
		return ErrWorkerQuitAbruptly
	}
}

// consumeLoop calls broker.StartConsuming until it returns without asking
// to be called again, ctx ends or stopped (nil: none) is closed.
func (w *Worker) consumeLoop(ctx context.Context, broker brokers.Broker, stopped <-chan int) error {
	for ctx.Err() == nil {
		retry, err := broker.StartConsuming(w.ConsumerTag, w.Concurrency, w)
		select {
		case <-stopped:
			return err
		default:
		}
		if !retry || ctx.Err() != nil {
			return err
		}
		w.mu.Lock()
		h := w.errorHandler
		w.mu.Unlock()
		if h != nil {
			h(err)
		} else {
			w.server.log.Warn("broker failed; consuming again", slog.String("worker", w.ConsumerTag), slog.Any("error", err))
		}
	}
	return nil
}
