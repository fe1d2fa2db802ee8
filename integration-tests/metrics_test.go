package integration_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	machinery "github.com/b6192125/machinist/v1"
	"github.com/b6192125/machinist/v1/backends/result"
	brokers "github.com/b6192125/machinist/v1/brokers/iface"
	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/tasks"
)

// metered is a sending Server and a working one on a shared broker and
// backend, as two processes, with their metrics read by hand.
type metered struct {
	sender, worker *machinery.Server
	reader         *sdkmetric.ManualReader
}

func newMetered(t *testing.T, p pair, mutate ...func(*config.Config)) *metered {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	s := processes(t, p, 2, append([]func(*config.Config){func(c *config.Config) { c.MeterProvider = mp }}, mutate...)...)
	return &metered{sender: s[0], worker: s[1], reader: reader}
}

// point is one data point: its metric, attributes and value (a counter's
// sum, a gauge's value, a histogram's count).
type point struct {
	metric string
	attrs  attribute.Set
	value  int64
}

func (m *metered) collect(t *testing.T) []point {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := m.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	var out []point
	for _, sm := range rm.ScopeMetrics {
		for _, md := range sm.Metrics {
			switch data := md.Data.(type) {
			case metricdata.Sum[int64]:
				for _, dp := range data.DataPoints {
					out = append(out, point{md.Name, dp.Attributes, dp.Value})
				}
			case metricdata.Gauge[int64]:
				for _, dp := range data.DataPoints {
					out = append(out, point{md.Name, dp.Attributes, dp.Value})
				}
			case metricdata.Histogram[float64]:
				for _, dp := range data.DataPoints {
					out = append(out, point{md.Name, dp.Attributes, int64(dp.Count)})
				}
			default:
				t.Fatalf("metric %s of unexpected type %T", md.Name, md.Data)
			}
		}
	}
	return out
}

// value sums the points of metric whose attributes include want.
func value(points []point, metric string, want map[string]string) int64 {
	var n int64
	for _, p := range points {
		if p.metric != metric {
			continue
		}
		match := true
		for k, v := range want {
			if got, ok := p.attrs.Value(attribute.Key(k)); !ok || got.Emit() != v {
				match = false
			}
		}
		if match {
			n += p.value
		}
	}
	return n
}

func describePoints(points []point) string {
	var lines []string
	for _, p := range points {
		lines = append(lines, fmt.Sprintf("  %s %v = %d", p.metric, p.attrs.Encoded(attribute.DefaultEncoder()), p.value))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// boundedKeys are the only attributes a metric may have: none holds a task
// UUID, args or anything else without a bound.
var boundedKeys = map[attribute.Key]bool{
	"messaging.system": true, "messaging.operation.name": true, "messaging.destination.name": true,
	"machinist.task.name": true, "machinist.task.outcome": true, "error.type": true,
	"machinist.task.state": true, "machinist.worker": true,
}

func wantBounded(t *testing.T, points []point, uuids []string) {
	t.Helper()
	for _, p := range points {
		for _, kv := range p.attrs.ToSlice() {
			if !boundedKeys[kv.Key] {
				t.Errorf("metric %s has attribute %s, which is not one of the bounded ones", p.metric, kv.Key)
			}
			for _, id := range uuids {
				if strings.Contains(kv.Value.Emit(), id) {
					t.Errorf("metric %s has a task UUID in attribute %s", p.metric, kv.Key)
				}
			}
		}
	}
}

// Each counter and histogram moves by what happened (five tasks and a
// chain of two): tasks sent, started,
// succeeded, failed, retried and archived, their durations by outcome and
// their waits, and nothing in flight once all are done.
func TestMetricsCountWhatHappened(t *testing.T) {
	forEachQueuedPair(t, func(t *testing.T, p pair) { metricsCountWhatHappened(t, p) })
}

// On a sharded queue the metrics count every shard's tasks under the
// queue's name.
func TestMetricsCountAShardedQueueAsOne(t *testing.T) {
	forPairs(t, redisPairs(), func(t *testing.T, p pair) {
		metricsCountWhatHappened(t, p, func(c *config.Config) {
			c.Redis.QueueShards = map[string]int{config.DefaultQueueName: 3}
		})
	})
}

// metricsCountWhatHappened runs tasks of every outcome, and a chain, on p
// and checks that the metrics count each once.
func metricsCountWhatHappened(t *testing.T, p pair, mutate ...func(*config.Config)) {
	m := newMetered(t, p, mutate...)
	var flakyCalls sync.Map
	if err := m.worker.RegisterTasks(map[string]interface{}{
		"add": func(a, b int64) (int64, error) { return a + b, nil },
		"bad": func() error { return errors.New("bad input") },
		"flaky": func(ctx context.Context) error {
			if _, again := flakyCalls.LoadOrStore(tasks.SignatureFromContext(ctx).UUID, true); !again {
				return tasks.NewErrRetryTaskLater("not yet", 10*time.Millisecond)
			}
			return nil
		},
	}); err != nil {
		t.Fatal(err)
	}
	w := m.worker.NewWorker("metered", 2)
	launch(t, w)
	<-w.Started()
	ctx := testCtx(t)
	var results []*result.AsyncResult
	var uuids []string
	for _, s := range []*tasks.Signature{sig("add", i64(1), i64(2)), sig("add", i64(1), i64(2)), sig("add", i64(1), i64(2)), sig("bad"), sig("flaky")} {
		r, err := m.sender.SendTaskWithContext(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		results = append(results, r)
		uuids = append(uuids, s.UUID)
	}
	// A chain's second step is sent by the worker (with the first's
	// acknowledgement, on a paired broker): it counts as sent too.
	chain, err := tasks.NewChain(sig("add", i64(1), i64(1)), sig("add", i64(1)))
	if err != nil {
		t.Fatal(err)
	}
	cr, err := m.sender.SendChainWithContext(ctx, chain)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range chain.Tasks {
		uuids = append(uuids, s.UUID)
	}
	for _, r := range results {
		_, _ = r.GetWithContext(ctx, poll)
	}
	if _, err := cr.GetWithContext(ctx, poll); err != nil {
		t.Fatal(err)
	}
	q := config.DefaultQueueName
	want := []struct {
		metric string
		attrs  map[string]string
		n      int64
	}{
		{"messaging.client.sent.messages", map[string]string{"machinist.task.name": "add", "messaging.destination.name": q, "messaging.operation.name": "send", "messaging.system": "machinist"}, 5},
		{"messaging.client.sent.messages", map[string]string{"machinist.task.name": "flaky"}, 1},
		{"messaging.client.consumed.messages", map[string]string{"machinist.task.name": "add", "messaging.operation.name": "process"}, 5},
		{"messaging.client.consumed.messages", map[string]string{"machinist.task.name": "flaky"}, 2},
		{"machinist.tasks.succeeded", map[string]string{"machinist.task.name": "add", "messaging.destination.name": q}, 5},
		{"machinist.tasks.succeeded", map[string]string{"machinist.task.name": "flaky"}, 1},
		{"machinist.tasks.retried", map[string]string{"machinist.task.name": "flaky"}, 1},
		{"machinist.tasks.failed", map[string]string{"machinist.task.name": "bad"}, 1},
		{"machinist.tasks.archived", map[string]string{"machinist.task.name": "bad"}, 1},
		{"messaging.process.duration", map[string]string{"machinist.task.name": "add", "machinist.task.outcome": "success"}, 5},
		{"messaging.process.duration", map[string]string{"machinist.task.name": "flaky", "machinist.task.outcome": "retry", "error.type": "_OTHER"}, 1},
		{"messaging.process.duration", map[string]string{"machinist.task.name": "flaky", "machinist.task.outcome": "success"}, 1},
		{"messaging.process.duration", map[string]string{"machinist.task.name": "bad", "machinist.task.outcome": "failure"}, 1},
		{"machinist.task.queue_latency", map[string]string{}, 7}, // first attempts only
		{"machinist.worker.tasks_in_flight", map[string]string{"machinist.worker": "metered"}, 0},
	}
	var points []point
	// The last settles may land just after the results are read.
	waitFor(t, "the metrics of every task", func() bool {
		points = m.collect(t)
		for _, w := range want {
			if value(points, w.metric, w.attrs) != w.n {
				return false
			}
		}
		return true
	})
	for _, w := range want {
		if got := value(points, w.metric, w.attrs); got != w.n {
			t.Errorf("%s %v = %d, want %d", w.metric, w.attrs, got, w.n)
		}
	}
	if t.Failed() {
		t.Fatalf("metrics:\n%s", describePoints(points))
	}
	wantBounded(t, points, uuids)
}

// A task whose worker died is counted as recovered; the queue depth gauge
// shows each state's tasks.
func TestMetricsOfRecoveryAndDepth(t *testing.T) {
	forEachQueuedPair(t, func(t *testing.T, p pair) {
		m := newMetered(t, p, func(c *config.Config) {
			c.LeaseDuration = time.Second
			c.RecoverInterval = 50 * time.Millisecond
		})
		release := make(chan struct{})
		if err := m.worker.RegisterTask("hold", func() error { <-release; return nil }); err != nil {
			t.Fatal(err)
		}
		ctx := testCtx(t)
		var results []*result.AsyncResult
		var uuids []string
		for range 3 {
			s := sig("hold")
			r, err := m.sender.SendTaskWithContext(ctx, s)
			if err != nil {
				t.Fatal(err)
			}
			results = append(results, r)
			uuids = append(uuids, s.UUID)
		}
		// A worker takes one and dies: nothing settles it.
		fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		ds, err := m.worker.GetBroker().(brokers.LeaseBroker).Fetch(fctx, []string{config.DefaultQueueName}, 1, nil)
		cancel()
		if err != nil || len(ds) != 1 {
			t.Fatalf("Fetch: %d, %v", len(ds), err)
		}
		w := m.worker.NewWorker("metered", 1)
		launch(t, w)
		<-w.Started()
		q := config.DefaultQueueName
		var points []point
		waitFor(t, "a recovery counted, and the depth of the queue: one running, two pending", func() bool {
			points = m.collect(t)
			return value(points, "machinist.tasks.recovered", map[string]string{"messaging.destination.name": q}) == 1 &&
				value(points, "machinist.queue.tasks", map[string]string{"messaging.destination.name": q, "machinist.task.state": "active"}) == 1 &&
				value(points, "machinist.queue.tasks", map[string]string{"messaging.destination.name": q, "machinist.task.state": "pending"}) == 2 &&
				value(points, "machinist.worker.tasks_in_flight", map[string]string{"machinist.worker": "metered"}) == 1
		})
		close(release)
		for _, r := range results {
			if _, err := r.GetWithContext(ctx, poll); err != nil {
				t.Fatal(err)
			}
		}
		wantBounded(t, points, uuids)
	})
}

// Of two processes working on a queue, only its elected maintainer reports
// the queue's depth.
func TestDepthReportedByTheMaintainerOnly(t *testing.T) {
	for _, p := range pairs() {
		if p.name != "redis" {
			continue
		}
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			shared := sharedPair(t, p)
			var procs []*metered
			for range 2 {
				reader := sdkmetric.NewManualReader()
				mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
				t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
				s := bareServer(t, shared, func(c *config.Config) { c.MeterProvider = mp })
				if err := s.RegisterTask("add", func(a, b int64) (int64, error) { return a + b, nil }); err != nil {
					t.Fatal(err)
				}
				w := s.NewWorker("w", 1)
				launch(t, w)
				<-w.Started()
				procs = append(procs, &metered{worker: s, reader: reader})
			}
			q := config.DefaultQueueName
			reports := func() (n int) {
				for _, m := range procs {
					if len(depthPoints(m.collect(t), "machinist.queue.tasks", q)) > 0 {
						n++
					}
				}
				return n
			}
			waitFor(t, "the maintainer to report the queue's depth", func() bool { return reports() > 0 })
			for range 5 {
				if n := reports(); n != 1 {
					t.Fatalf("%d processes report the queue's depth, want only its maintainer", n)
				}
			}
		})
	}
}

// depthPoints returns the points of metric for queue.
func depthPoints(points []point, metric, queue string) []point {
	var out []point
	for _, p := range points {
		if v, ok := p.attrs.Value("messaging.destination.name"); p.metric == metric && ok && v.AsString() == queue {
			out = append(out, p)
		}
	}
	return out
}
