package redisbroker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/b6192125/machinist/internal/redisbatch"

	"github.com/b6192125/machinist/v1/brokers/iface"
	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/tasks"
)

var errNoQueue = iface.ErrNoQueue

// Broker is the Redis broker. See the package documentation for the
// protocol.
type Broker struct {
	client   goredis.UniversalClient
	owned    bool // Close closes the client
	batch    *redisbatch.Batcher
	ownBatch bool // Close closes batch
	cnf      *config.Config
	keys     *keys
	log      *slog.Logger
	// cluster is set when the client is a Redis Cluster client: blocking
	// on several queues' wake-up lists then takes one call per queue.
	cluster bool

	mu         sync.Mutex
	knownQueue map[string]bool // queues added to the queues set
	maintained map[string]bool // queues with a forwarder and recoverer
	closed     bool
	ctx        context.Context // ends at Close
	cancel     context.CancelFunc
	wg         sync.WaitGroup
}

var _ iface.Broker = (*Broker)(nil)

// Params configures New.
type Params struct {
	// Client is the connection; see internal/redisconn for building one
	// from a URL.
	Client goredis.UniversalClient
	// OwnsClient makes Close close Client.
	OwnsClient bool
	// Batcher, when set, sends publishes and acknowledgements in pipelines
	// shared with other users of Client (the backend on the same Redis);
	// otherwise the broker makes one of its own.
	Batcher *redisbatch.Batcher
	// Config must have been through WithDefaults.
	Config *config.Config
}

// New returns a broker on p.Client. Its background work (promoting due
// tasks, recovering expired leases) starts for a queue the first time a
// worker fetches from it, so a process that only sends tasks runs none.
func New(p Params) *Broker {
	log := p.Config.Logger
	if log == nil {
		log = slog.Default()
	}
	_, cluster := p.Client.(*goredis.ClusterClient)
	ctx, cancel := context.WithCancel(context.Background())
	batch, ownBatch := p.Batcher, false
	if batch == nil {
		batch, ownBatch = redisbatch.New(p.Client), true
	}
	return &Broker{
		client:     p.Client,
		owned:      p.OwnsClient,
		batch:      batch,
		ownBatch:   ownBatch,
		cnf:        p.Config,
		keys:       &keys{prefix: p.Config.Redis.KeyPrefix},
		log:        log.With(slog.String("component", "redisbroker")),
		cluster:    cluster,
		knownQueue: make(map[string]bool),
		maintained: make(map[string]bool),
		ctx:        ctx,
		cancel:     cancel,
	}
}

// Batcher returns the batcher the broker sends publishes and
// acknowledgements through.
func (b *Broker) Batcher() *redisbatch.Batcher { return b.batch }

func (b *Broker) isClosed() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closed
}

// checkOpen returns ErrClosed once Close was called.
func (b *Broker) checkOpen() error {
	if b.isClosed() {
		return iface.ErrClosed
	}
	return nil
}

func msOf(t time.Time) int64 {
	ms := t.UnixMilli()
	if t.After(time.UnixMilli(ms)) {
		ms++ // round up: a task never becomes due before its time
	}
	return ms
}

// Publish adds tasks to their queues: one script per queue, all or nothing
// within a queue.
func (b *Broker) Publish(ctx context.Context, sigs ...*tasks.Signature) error {
	return b.PublishWith(ctx, nil, sigs...)
}

// PublishWith is Publish, with the commands of before sent first in the same
// pipeline (Server.SendTask sends the PENDING state so, in one round trip).
// An error of before's commands is returned, and the tasks are published
// anyway.
func (b *Broker) PublishWith(ctx context.Context, before redisbatch.QueueFunc, sigs ...*tasks.Signature) error {
	if err := b.checkOpen(); err != nil {
		return err
	}
	byQueue := make(map[string][]interface{})
	var order []string
	for _, sig := range sigs {
		if err := validQueue(sig.RoutingKey); err != nil {
			return fmt.Errorf("redisbroker: publish task %s: %w", sig.UUID, err)
		}
		if sig.UUID == "" {
			return fmt.Errorf("redisbroker: publish task %q: signature has no UUID", sig.Name)
		}
		msg, err := tasks.EncodeSignature(sig)
		if err != nil {
			return fmt.Errorf("redisbroker: publish task %s: %w", sig.UUID, err)
		}
		var eta int64
		if sig.ETA != nil {
			eta = msOf(*sig.ETA)
		}
		if _, ok := byQueue[sig.RoutingKey]; !ok {
			order = append(order, sig.RoutingKey)
		}
		byQueue[sig.RoutingKey] = append(byQueue[sig.RoutingKey], sig.UUID, msg, eta)
	}
	for _, q := range order {
		if err := b.registerQueue(ctx, q); err != nil {
			return err
		}
		qk := b.keys.queue(q)
		keys := []string{qk.pending, qk.scheduled, qk.archived, qk.notify}
		args := append([]interface{}{qk.task}, byQueue[q]...)
		var res []interface{}
		var err error
		lane := byQueue[q][0].(string) // the first task's id
		if before != nil {
			res, err = b.publishAfter(ctx, lane, before, keys, args)
			before = nil
		} else {
			res, err = b.batch.RunScript(ctx, lane, enqueueScript, keys, args...).Slice()
		}
		if err != nil {
			return fmt.Errorf("redisbroker: publish to queue %s: %w", q, err)
		}
		if code, _ := res[0].(int64); code != statusOK {
			id, _ := res[1].(string)
			return statusError(code, id)
		}
	}
	return nil
}

// publishAfter runs before's commands and the enqueue script in one
// pipeline.
func (b *Broker) publishAfter(ctx context.Context, lane string, before redisbatch.QueueFunc, keys []string, args []interface{}) ([]interface{}, error) {
	var n int
	cmds, err := b.batch.Submit(ctx, lane, func(p goredis.Pipeliner) []goredis.Cmder {
		cmds := before(p)
		n = len(cmds)
		return append(cmds, enqueueScript.EvalSha(ctx, p, keys, args...))
	}).Wait(ctx)
	if err != nil {
		return nil, err
	}
	for _, c := range cmds[:n] {
		if err := c.Err(); err != nil {
			return nil, fmt.Errorf("before publishing: %w", err)
		}
	}
	cmd := cmds[n].(*goredis.Cmd)
	if redisbatch.IsNoScript(cmd.Err()) {
		cmd = enqueueScript.Run(ctx, b.client, keys, args...)
	}
	return cmd.Slice()
}

// registerQueue adds q to the set of queues once per process.
func (b *Broker) registerQueue(ctx context.Context, q string) error {
	b.mu.Lock()
	known := b.knownQueue[q]
	b.mu.Unlock()
	if known {
		return nil
	}
	if err := b.client.SAdd(ctx, b.keys.queues(), q).Err(); err != nil {
		return fmt.Errorf("redisbroker: register queue %s: %w", q, err)
	}
	b.mu.Lock()
	b.knownQueue[q] = true
	b.mu.Unlock()
	return nil
}

func newToken() string {
	var buf [12]byte
	_, _ = rand.Read(buf[:])
	return hex.EncodeToString(buf[:])
}

// Fetch takes up to max pending tasks from queues, in order, waiting on the
// queues' wake-up lists while there are none.
func (b *Broker) Fetch(ctx context.Context, queues []string, max int) ([]*iface.Delivery, error) {
	if len(queues) == 0 {
		return nil, errNoQueue
	}
	for _, q := range queues {
		if err := validQueue(q); err != nil {
			return nil, err
		}
	}
	if max < 1 {
		max = 1
	}
	if err := b.checkOpen(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	b.maintain(queues)
	// A blocked Fetch wakes when the broker closes.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(b.ctx, cancel)
	defer stop()
	woken := "" // the queue whose wake-up token the last wait took
	for {
		if err := b.checkOpen(); err != nil {
			b.resignal(woken)
			return nil, err
		}
		var out []*iface.Delivery
		servedWoken := false // whether the queue whose token we took was tried
		var fetchErr error
		for _, q := range queues {
			ds, err := b.dequeue(ctx, q, max-len(out))
			if err != nil {
				fetchErr = err
				break
			}
			servedWoken = servedWoken || q == woken
			out = append(out, ds...)
			if len(out) == max {
				break
			}
		}
		if woken != "" && !servedWoken {
			// The token was for a queue this fetch did not serve: pass it on
			// to another idle worker.
			b.resignal(woken)
		}
		if fetchErr != nil && len(out) == 0 {
			return nil, b.fetchError(ctx, fetchErr)
		}
		if len(out) > 0 {
			return out, nil
		}
		var err error
		if woken, err = b.wait(ctx, queues); err != nil {
			return nil, b.fetchError(ctx, err)
		}
	}
}

// resignal leaves a wake-up token on queue's notify list (at most one),
// for a token taken but not used. It is best effort: without it an idle
// worker still looks within NormalTasksPollPeriod.
func (b *Broker) resignal(queue string) {
	if queue == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	notify := b.keys.queue(queue).notify
	pipe := b.client.Pipeline()
	pipe.LPush(ctx, notify, "1")
	pipe.LTrim(ctx, notify, 0, 0)
	_, _ = pipe.Exec(ctx)
}

// fetchError says why a Fetch stopped: the broker closed, the caller's
// context ended, or err.
func (b *Broker) fetchError(ctx context.Context, err error) error {
	switch {
	case b.isClosed():
		return iface.ErrClosed
	case ctx.Err() != nil:
		return ctx.Err()
	}
	return err
}

// dequeue runs the dequeue script on one queue.
func (b *Broker) dequeue(ctx context.Context, q string, n int) ([]*iface.Delivery, error) {
	qk := b.keys.queue(q)
	lease := b.cnf.LeaseDuration
	args := make([]interface{}, 0, 3+n)
	args = append(args, qk.task, n, lease.Milliseconds())
	base := newToken() // one random read per fetch; the index makes each token unique
	for i := 0; i < n; i++ {
		args = append(args, base+strconv.Itoa(i))
	}
	start := time.Now()
	res, err := dequeueScript.Run(ctx, b.client, []string{qk.pending, qk.paused, qk.lease, qk.notify}, args...).Slice()
	if err != nil {
		return nil, fmt.Errorf("redisbroker: fetch from queue %s: %w", q, err)
	}
	// The local expiry is counted from before the call, so the worker
	// gives the lease up no later than Redis does.
	localExpiry := start.Add(lease)
	var out []*iface.Delivery
	for i := 1; i+4 < len(res); i += 5 {
		id, _ := res[i].(string)
		msg, _ := res[i+1].(string)
		retried, _ := strconv.Atoi(fmt.Sprint(res[i+2]))
		recovered, _ := strconv.Atoi(fmt.Sprint(res[i+3]))
		token, _ := res[i+4].(string)
		d := &iface.Delivery{
			Queue:     q,
			Lease:     iface.NewLease(token, localExpiry),
			Retried:   retried,
			Recovered: recovered,
		}
		sig, err := tasks.DecodeSignature([]byte(msg))
		if err != nil {
			d.Signature = &tasks.Signature{UUID: id, RoutingKey: q}
			reason := fmt.Sprintf("cannot decode task message: %v", err)
			b.log.Error("archiving task that cannot be decoded", slog.String("task_id", id), slog.String("queue", q), slog.Any("error", err))
			if aerr := b.Archive(ctx, d, reason); aerr != nil {
				b.log.Error("archiving undecodable task failed", slog.String("task_id", id), slog.Any("error", aerr))
			}
			continue
		}
		sig.UUID = id
		d.Signature = sig
		out = append(out, d)
	}
	return out, nil
}

// blockTimeout is how long one BLPOP may block: NormalTasksPollPeriod, but
// less than the client's read timeout and no later than ctx's deadline,
// because go-redis does not interrupt a blocking command when ctx ends.
func (b *Broker) blockTimeout(ctx context.Context) time.Duration {
	timeout := time.Duration(b.cnf.Redis.NormalTasksPollPeriod) * time.Millisecond
	if read := b.readTimeout(); read > 0 {
		timeout = min(timeout, read/2)
	}
	if deadline, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(deadline))
	}
	return max(timeout, 10*time.Millisecond)
}

// readTimeout is the client's own read timeout (the client may have been
// made by the caller, not from the config); 0 means none.
func (b *Broker) readTimeout() time.Duration {
	var read time.Duration
	switch c := b.client.(type) {
	case *goredis.Client:
		read = c.Options().ReadTimeout
	case *goredis.ClusterClient:
		read = c.Options().ReadTimeout
	case *goredis.Ring:
		read = c.Options().ReadTimeout
	default:
		return 3 * time.Second
	}
	switch {
	case read == 0:
		return 3 * time.Second // go-redis's default
	case read < 0:
		return 0 // no timeout
	}
	return read
}

// blpop pops a wake-up token from one of keys, blocking up to timeout
// (BLPOP with a fractional timeout, which go-redis's BLPop rounds to whole
// seconds). It returns the key the token came from, or goredis.Nil when the
// time ran out.
func (b *Broker) blpop(ctx context.Context, timeout time.Duration, keys ...string) (string, error) {
	args := make([]interface{}, 0, len(keys)+2)
	args = append(args, "blpop")
	for _, k := range keys {
		args = append(args, k)
	}
	args = append(args, strconv.FormatFloat(timeout.Seconds(), 'f', 3, 64))
	res, err := b.client.Do(ctx, args...).StringSlice()
	if err != nil {
		return "", err
	}
	return res[0], nil
}

// wait blocks until a wake-up token arrives on one of the queues' notify
// lists, or for at most blockTimeout. It returns the queue whose token it
// took, or "" when the time ran out.
func (b *Broker) wait(ctx context.Context, queues []string) (string, error) {
	timeout := b.blockTimeout(ctx)
	byNotify := make(map[string]string, len(queues))
	for _, q := range queues {
		byNotify[b.keys.queue(q).notify] = q
	}
	if !b.cluster || len(queues) == 1 {
		notify := make([]string, len(queues))
		for i, q := range queues {
			notify[i] = b.keys.queue(q).notify
		}
		key, err := b.blpop(ctx, timeout, notify...)
		switch {
		case err == nil:
			return byNotify[key], nil
		case errors.Is(err, goredis.Nil):
			return "", nil
		case ctx.Err() != nil:
			return "", ctx.Err()
		}
		return "", fmt.Errorf("redisbroker: wait for tasks: %w", err)
	}
	// Redis Cluster: the queues live in different slots, so wait on each in
	// parallel and take the first token; a token taken once wait has
	// returned is passed back for other workers.
	type wake struct {
		queue string
		err   error
	}
	woke := make(chan wake, len(queues))
	var settled atomic.Bool
	defer settled.Store(true)
	for _, q := range queues {
		notify := b.keys.queue(q).notify
		go func() {
			_, err := b.blpop(ctx, timeout, notify)
			switch {
			case errors.Is(err, goredis.Nil):
				err = errTimeout
			case err == nil && !settled.CompareAndSwap(false, true):
				b.resignal(byNotify[notify])
				return
			}
			woke <- wake{queue: byNotify[notify], err: err}
		}()
	}
	for range queues {
		w := <-woke
		if w.err == nil {
			return w.queue, nil
		}
		if w.err != errTimeout {
			if ctx.Err() != nil {
				return "", ctx.Err()
			}
			return "", fmt.Errorf("redisbroker: wait for tasks: %w", w.err)
		}
	}
	return "", nil
}

var errTimeout = errors.New("timeout")

// ExtendLeases renews the leases of ds: one script per queue.
func (b *Broker) ExtendLeases(ctx context.Context, ds ...*iface.Delivery) error {
	if err := b.checkOpen(); err != nil {
		return err
	}
	byQueue := make(map[string][]*iface.Delivery)
	for _, d := range ds {
		if d.Lease.Valid() { // a lease lost here is not renewed there either
			byQueue[d.Queue] = append(byQueue[d.Queue], d)
		}
	}
	var errs []error
	for q, group := range byQueue {
		qk := b.keys.queue(q)
		args := make([]interface{}, 0, 2+2*len(group))
		args = append(args, qk.task, b.cnf.LeaseDuration.Milliseconds())
		for _, d := range group {
			args = append(args, d.Signature.UUID, d.Lease.Token())
		}
		start := time.Now()
		res, err := extendScript.Run(ctx, b.client, []string{qk.lease}, args...).Slice()
		if err != nil {
			errs = append(errs, fmt.Errorf("redisbroker: extend leases in queue %s: %w", q, err))
			continue
		}
		lost := make(map[string]bool, len(res)-1)
		for _, id := range res[1:] {
			s, _ := id.(string)
			lost[s] = true
		}
		for _, d := range group {
			if lost[d.Signature.UUID] {
				d.Lease.Lose()
			} else {
				d.Lease.Extend(start.Add(b.cnf.LeaseDuration))
			}
		}
	}
	return errors.Join(errs...)
}

// settled finishes a settling call: the lease is released on success and
// marked lost when the broker refused it.
func settled(d *iface.Delivery, err error) error {
	switch {
	case err == nil:
		d.Lease.Release()
	case errors.Is(err, iface.ErrLeaseLost):
		d.Lease.Lose()
	}
	return err
}

// Ack forgets a task that is done, or keeps it for CompletedRetention.
func (b *Broker) Ack(ctx context.Context, d *iface.Delivery) error {
	if err := b.checkOpen(); err != nil {
		return err
	}
	qk := b.keys.queue(d.Queue)
	id := d.Signature.UUID
	code, err := b.batch.RunScript(ctx, id, ackScript, []string{qk.task + id, qk.lease, qk.completed},
		id, d.Lease.Token(), b.cnf.CompletedRetention.Milliseconds()).Int64()
	if err != nil {
		return fmt.Errorf("redisbroker: acknowledge task %s: %w", id, err)
	}
	return settled(d, statusError(code, id))
}

// AckWithState settles a task that is done and writes its result state in
// the same script, only if the caller holds the lease: a worker that lost
// its lease writes nothing. The state key must be reachable from the
// queue's script, which holds on a single Redis server, not on a cluster.
func (b *Broker) AckWithState(ctx context.Context, d *iface.Delivery, w *redisbatch.HashWrite) error {
	if err := b.checkOpen(); err != nil {
		return err
	}
	if b.cluster {
		return fmt.Errorf("redisbroker: AckWithState on Redis Cluster: the state key is in another slot")
	}
	qk := b.keys.queue(d.Queue)
	id := d.Signature.UUID
	args := make([]interface{}, 0, 4+len(w.Fields))
	args = append(args, id, d.Lease.Token(), b.cnf.CompletedRetention.Milliseconds(), w.TTL.Milliseconds())
	args = append(args, w.Fields...)
	code, err := b.batch.RunScript(ctx, id, ackSuccessScript, []string{qk.task + id, qk.lease, qk.completed, w.Key}, args...).Int64()
	if err != nil {
		return fmt.Errorf("redisbroker: acknowledge task %s: %w", id, err)
	}
	return settled(d, statusError(code, id))
}

// Retry schedules the task to run again at at.
func (b *Broker) Retry(ctx context.Context, d *iface.Delivery, at time.Time, errMsg string) error {
	if err := b.checkOpen(); err != nil {
		return err
	}
	qk := b.keys.queue(d.Queue)
	id := d.Signature.UUID
	msg, err := tasks.EncodeSignature(d.Signature)
	if err != nil {
		return fmt.Errorf("redisbroker: retry task %s: %w", id, err)
	}
	err = runStatus(ctx, b.client, retryScript, id, []string{qk.task + id, qk.lease, qk.retry, qk.pending, qk.notify},
		id, d.Lease.Token(), msg, msOf(at), errMsg)
	return settled(d, err)
}

// Archive keeps the task as a dead letter with reason.
func (b *Broker) Archive(ctx context.Context, d *iface.Delivery, reason string) error {
	if err := b.checkOpen(); err != nil {
		return err
	}
	qk := b.keys.queue(d.Queue)
	id := d.Signature.UUID
	err := runStatus(ctx, b.client, archiveScript, id, []string{qk.task + id, qk.lease, qk.archived},
		id, d.Lease.Token(), reason, b.cnf.ArchiveMaxAge.Milliseconds(), b.cnf.ArchiveMaxSize, qk.task)
	return settled(d, err)
}

// Requeue puts unfinished tasks back at the head of their queues.
func (b *Broker) Requeue(ctx context.Context, ds ...*iface.Delivery) error {
	if err := b.checkOpen(); err != nil {
		return err
	}
	byQueue := make(map[string][]*iface.Delivery)
	var order []string
	for _, d := range ds {
		if _, ok := byQueue[d.Queue]; !ok {
			order = append(order, d.Queue)
		}
		byQueue[d.Queue] = append(byQueue[d.Queue], d)
	}
	var errs []error
	for _, q := range order {
		group := byQueue[q]
		qk := b.keys.queue(q)
		args := make([]interface{}, 0, 1+2*len(group))
		args = append(args, qk.task)
		for _, d := range group {
			args = append(args, d.Signature.UUID, d.Lease.Token())
		}
		res, err := requeueScript.Run(ctx, b.client, []string{qk.pending, qk.lease, qk.notify}, args...).Slice()
		if err != nil {
			errs = append(errs, fmt.Errorf("redisbroker: requeue to queue %s: %w", q, err))
			continue
		}
		lost := make(map[string]bool, len(res))
		for _, id := range res {
			s, _ := id.(string)
			lost[s] = true
		}
		for _, d := range group {
			if lost[d.Signature.UUID] {
				d.Lease.Lose()
				errs = append(errs, fmt.Errorf("redisbroker: requeue task %s: %w", d.Signature.UUID, iface.ErrLeaseLost))
			} else {
				d.Lease.Release()
			}
		}
	}
	return errors.Join(errs...)
}

// Claim reports whether the caller is the first to claim key within ttl.
func (b *Broker) Claim(ctx context.Context, key string, ttl time.Duration) (bool, error) {
	if err := b.checkOpen(); err != nil {
		return false, err
	}
	ok, err := b.client.SetNX(ctx, b.keys.claim(key), "1", ttl).Result()
	if err != nil {
		return false, fmt.Errorf("redisbroker: claim %s: %w", key, err)
	}
	return ok, nil
}

// Close stops the background work, and closes the client when the broker
// owns it. Safe to call more than once.
func (b *Broker) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	b.mu.Unlock()
	b.cancel()
	b.wg.Wait()
	if b.ownBatch {
		b.batch.Close()
	}
	if b.owned {
		return b.client.Close()
	}
	return nil
}
