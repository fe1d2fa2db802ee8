package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// lockedBuffer is a bytes.Buffer the exporter writes while the test reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// The example runs its workflows, prints their spans and serves the task
// metrics on /metrics in Prometheus's format.
func TestExampleExportsTracesAndMetrics(t *testing.T) {
	t.Setenv("BROKER", "")
	t.Setenv("RESULT_BACKEND", "")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var spans lockedBuffer
	addr := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, options{spans: &spans, serve: "127.0.0.1:0", listening: func(a string) { addr <- a }})
	}()
	var metrics string
	select {
	case a := <-addr:
		resp, err := http.Get("http://" + a + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		metrics = string(body)
	case err := <-done:
		t.Fatalf("run returned before serving: %v", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`messaging_client_sent_messages_total{`,
		`machinist_tasks_succeeded_total{`,
		`machinist_tasks_retried_total{`,
		`messaging_process_duration_seconds_bucket{`,
		`machinist_queue_tasks{`,
		`machinist_task_name="square"`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s:\n%s", want, metrics)
		}
	}
	// The batcher exports the spans at the latest when the provider shuts
	// down, before run returns.
	out := spans.String()
	for _, want := range []string{`"Name": "send machinery_tasks"`, `"Name": "process machinery_tasks"`, `"machinist.workflow.type"`, `"Links": [`} {
		if !strings.Contains(out, want) {
			t.Errorf("the spans printed lack %s", want)
		}
	}
}
