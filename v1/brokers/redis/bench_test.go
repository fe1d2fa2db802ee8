package redisbroker_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/b6192125/machinist/internal/redistest"
	redisbroker "github.com/b6192125/machinist/v1/brokers/redis"
	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/tasks"
)

// benchBroker returns a broker on a Redis of the benchmark's own.
func benchBroker(b *testing.B) *redisbroker.Broker {
	b.Helper()
	srv := redistest.Start(b)
	cnf := (&config.Config{}).WithDefaults()
	cnf.Redis.KeyPrefix = "bench"
	br := newBrokerOn(srv.Client(b), cnf)
	b.Cleanup(func() { br.Close() })
	return br
}

func benchSig(i int) *tasks.Signature {
	return &tasks.Signature{
		UUID:       fmt.Sprintf("task_%d", i),
		Name:       "add",
		RoutingKey: "bench",
		Args:       []tasks.Arg{{Type: "int64", Value: 1}, {Type: "int64", Value: 2}},
	}
}

// BenchmarkPublish publishes one task per call.
func BenchmarkPublish(b *testing.B) {
	br := benchBroker(b)
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := br.Publish(ctx, benchSig(i)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPublishBatch1000 publishes 1000 tasks per call, as SendGroup does.
func BenchmarkPublishBatch1000(b *testing.B) {
	br := benchBroker(b)
	ctx := context.Background()
	sigs := make([]*tasks.Signature, 1000)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j := range sigs {
			sigs[j] = benchSig(i*len(sigs) + j)
		}
		if err := br.PublishTasks(ctx, sigs...); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*len(sigs))/b.Elapsed().Seconds(), "tasks/s")
}

// benchFetchAck fetches batch tasks at a time and acknowledges each.
func benchFetchAck(b *testing.B, batch int) {
	br := benchBroker(b)
	ctx := context.Background()
	for i := 0; i < b.N; i += 1000 {
		sigs := make([]*tasks.Signature, 0, 1000)
		for j := i; j < i+1000 && j < b.N; j++ {
			sigs = append(sigs, benchSig(j))
		}
		if err := br.PublishTasks(ctx, sigs...); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for done := 0; done < b.N; {
		ds, err := br.Fetch(ctx, []string{"bench"}, min(batch, b.N-done), nil)
		if err != nil {
			b.Fatal(err)
		}
		for _, d := range ds {
			if err := br.Ack(ctx, d); err != nil {
				b.Fatal(err)
			}
		}
		done += len(ds)
	}
}

// BenchmarkFetchAck takes one task under a lease and acknowledges it.
func BenchmarkFetchAck(b *testing.B) { benchFetchAck(b, 1) }

// BenchmarkFetchAckBatch10 takes ten tasks per fetch, as a worker with
// free slots and a backlog does.
func BenchmarkFetchAckBatch10(b *testing.B) { benchFetchAck(b, 10) }
