package machinery

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/b6192125/machinist/internal/rdb"
	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/internal/dial"
	"github.com/b6192125/machinist/v1/internal/machineryredis"
	"github.com/b6192125/machinist/v1/tasks"
	"github.com/b6192125/machinist/v1/worker"
)

// migration is the migration mode (config.Config.MachineryBroker):
// machinery's Redis broker and backend, and a Server on them through which
// the tasks taken from machinery's queues send what follows them (a
// chain's next step, a chord's callback, a retry) back to machinery's
// queues, their states to machinery's backend.
type migration struct {
	broker  *machineryredis.Broker
	backend *machineryredis.Backend
	server  *Server
	conns   []*rdb.Machinery
}

// migration returns the Server's migration mode, made the first time; nil
// when the config does not turn it on.
func (s *Server) migration() (*migration, error) {
	s.migrationOnce.Do(func() {
		cnf := s.GetConfig()
		if cnf.MachineryBroker == "" {
			return
		}
		s.migrating, s.migrationErr = newMigration(cnf)
	})
	return s.migrating, s.migrationErr
}

func newMigration(cnf *config.Config) (*migration, error) {
	m := &migration{}
	dialURL := func(url string) (*rdb.Machinery, error) {
		c, err := dial.Machinery(url, cnf)
		if err != nil {
			m.close()
			return nil, fmt.Errorf("machinist: migration mode: %s: %w", config.RedactURL(url), err)
		}
		m.conns = append(m.conns, c)
		return c, nil
	}
	queues, err := dialURL(cnf.MachineryBroker)
	if err != nil {
		return nil, err
	}
	states := queues
	if cnf.MachineryResultBackend != cnf.MachineryBroker {
		if states, err = dialURL(cnf.MachineryResultBackend); err != nil {
			return nil, err
		}
	}
	// The Server on machinery's side sends as machinery's does; it is not
	// in the migration mode itself.
	own := *cnf
	own.MachineryBroker, own.MachineryResultBackend = "", ""
	m.broker = machineryredis.NewBroker(queues, &own)
	m.backend = machineryredis.NewBackend(states, &own)
	m.server = newServer(&own, m.broker, m.backend)
	return m, nil
}

func (m *migration) close() error {
	var errs []error
	for _, c := range m.conns {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

// cancelledGrace is how long the migration mode waits, once it has
// cancelled machinery's tasks, for them to return and write their
// outcome (a FAILURE, or a retry sent to machinery's queue).
const cancelledGrace = 5 * time.Second

// migrate runs, until ctx ends, the tasks machinery programs send to each
// of queues, concurrency at a time per queue, with w's handlers, and moves
// machinery's due delayed tasks to their queues; a task that runs when
// abort ends is cancelled. It returns once the tasks it took have
// finished, or cancelledGrace after abort has ended, leaving those that
// have not.
func (w *Worker) migrate(ctx, abort context.Context, m *migration, queues []string, concurrency int) {
	abandon, abandoned := context.WithCancel(context.WithoutCancel(ctx))
	defer abandoned()
	go cancelAfter(abort, abandon.Done(), cancelledGrace, abandoned)
	w.mu.Lock()
	engine := w.engine(func(p *worker.Params) {
		p.Broker, p.Backend = m.broker, m.backend
		p.BrokerName, p.BackendName = config.RedactURL(w.server.GetConfig().MachineryBroker), config.RedactURL(w.server.GetConfig().MachineryResultBackend)
		p.SendFunc, p.PrepareFunc = m.server.sendCallback, m.server.prepareCallback
	})
	w.mu.Unlock()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		m.broker.MoveDelayed(ctx, time.Duration(w.server.GetConfig().Redis.DelayedTasksPollPeriod)*time.Millisecond)
	}()
	for _, q := range queues {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m.broker.Consume(ctx, abandon, q, concurrency, migrationProcessor{w: w, engine: engine, ctx: abort})
		}()
	}
	wg.Wait()
}

// cancelAfter calls cancel when stopped has not closed within timeout of
// ctx's end: the migration mode cancels machinery's tasks ShutdownTimeout
// after a graceful stop began, as machinist's own, and leaves them
// cancelledGrace after that.
func cancelAfter(ctx context.Context, stopped <-chan struct{}, timeout time.Duration, cancel context.CancelFunc) {
	select {
	case <-ctx.Done():
	case <-stopped:
		return
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-t.C:
		cancel()
	case <-stopped:
	}
}

// migrationProcessor hands a task taken from machinery's queue to the
// worker's engine; the worker's Server and pre-consume handler say which
// tasks it has and when it takes them.
type migrationProcessor struct {
	w      *Worker
	engine *worker.Worker
	ctx    context.Context
}

func (p migrationProcessor) Process(sig *tasks.Signature) error {
	return p.engine.Process(p.ctx, sig)
}

func (p migrationProcessor) PreConsumeHandler() bool { return p.w.PreConsumeHandler() }
func (p migrationProcessor) IsTaskRegistered(name string) bool {
	return p.w.server.IsTaskRegistered(name)
}
