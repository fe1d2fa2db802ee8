package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/b6192125/machinist/internal/redistest"
	machinery "github.com/b6192125/machinist/v1"
	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/dashboard"
	"github.com/b6192125/machinist/v1/tasks"
)

// fillArchive writes n archived tasks to queue under prefix, as the
// archive script leaves them (the keys of internal/rdb/keys.go), from a
// Lua loop: filling through the broker would take minutes.
func fillArchive(b *testing.B, rdb *goredis.Client, prefix, queue string, n int) {
	b.Helper()
	const fill = `
local base, from, to, now = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
for i = from, to do
	local id = "task_" .. i
	redis.call("HSET", base .. "t:" .. id, "msg",
		'{"UUID":"' .. id .. '","Name":"send","RoutingKey":"` + "%s" + `","Args":[{"Type":"int64","Value":' .. i .. '}]}',
		"state", "archived", "error", "mailbox full", "failed_at", now - i)
	redis.call("ZADD", base .. "archived", now - i, id)
end
return to - from + 1`
	script := goredis.NewScript(fmt.Sprintf(fill, queue))
	base := prefix + ":{" + queue + "}:"
	ctx := context.Background()
	for from := 1; from <= n; from += 50_000 {
		to := min(from+50_000-1, n)
		if err := script.Run(ctx, rdb, []string{base + "archived"}, base, from, to, 1_800_000_000_000).Err(); err != nil {
			b.Fatal(err)
		}
	}
	if err := rdb.SAdd(ctx, prefix+":queues", queue).Err(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkMillionArchived times the command's reads (each a whole run:
// configuration, connection, reads, output) on a queue of 1,000,000
// archived tasks, and on one of 2,000 beside it: every read is a count or
// a page, so each takes about as long on both.
//
//	go test -run '^$' -bench MillionArchived -benchtime 200x ./cmd/machinist
func BenchmarkMillionArchived(b *testing.B) {
	srv := redistest.Start(b)
	rdb := srv.Client(b)
	const prefix, n = "million", 1_000_000
	fillArchive(b, rdb, prefix, "mail", n)
	fillArchive(b, rdb, prefix, "small", 2_000)
	cfg := filepath.Join(b.TempDir(), "machinist.yml")
	yml := fmt.Sprintf("broker: %s\nredis:\n  key_prefix: %s\n", srv.URL(), prefix)
	if err := os.WriteFile(cfg, []byte(yml), 0o600); err != nil {
		b.Fatal(err)
	}
	var lines []string
	for _, q := range []string{"small", "mail"} {
		last := map[string]string{"mail": "999999", "small": "1999"}[q]
		lines = append(lines, "queue inspect "+q, "task ls "+q+" --state archived",
			"task ls "+q+" --state archived --page "+map[string]string{"mail": "49999", "small": "99"}[q],
			"task show task_"+last+" --queue "+q)
	}
	for _, line := range append([]string{"stats"}, lines...) {
		b.Run(strings.ReplaceAll(line, " ", "_"), func(b *testing.B) {
			var out bytes.Buffer
			args := append([]string{"--config", cfg}, strings.Fields(line)...)
			for b.Loop() {
				out.Reset()
				if code := run(context.Background(), args, env{getenv: func(string) string { return "" }, stdout: &out, stderr: &out}); code != exitOK {
					b.Fatalf("%s: exit %d: %s", line, code, out.String())
				}
			}
			if !strings.Contains(out.String(), "task_") && !strings.Contains(out.String(), "Archived") && !strings.Contains(out.String(), "QUEUE") {
				b.Fatalf("%s printed:\n%s", line, out.String())
			}
		})
	}
}

// BenchmarkMillionArchivedPages times the dashboard's pages (a full page
// of 50 tasks, first and last; a search by name that reads its window of
// 1000 tasks; a task) on a queue of 1,000,000 archived tasks and on one
// of 2,000.
//
//	go test -run '^$' -bench MillionArchivedPages -benchtime 200x ./cmd/machinist
func BenchmarkMillionArchivedPages(b *testing.B) {
	srv := redistest.Start(b)
	rdb := srv.Client(b)
	const prefix = "million"
	fillArchive(b, rdb, prefix, "mail", 1_000_000)
	fillArchive(b, rdb, prefix, "small", 2_000)
	cnf := &config.Config{Broker: srv.URL(), ResultBackend: srv.URL(), NoUnixSignals: true,
		Logger: discard, Redis: &config.RedisConfig{KeyPrefix: prefix}}
	s, err := machinery.NewServer(cnf)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	h, err := dashboard.New(s, dashboard.Options{})
	if err != nil {
		b.Fatal(err)
	}
	var pages []string
	for _, q := range []string{"small", "mail"} {
		last := map[string]string{"mail": "999999", "small": "1999"}[q]
		deep := map[string]string{"mail": "999950", "small": "1950"}[q]
		pages = append(pages,
			"/queues/"+q+"?state=archived",
			"/queues/"+q+"?state=archived&offset="+deep,
			"/queues/"+q+"?state=archived&name=nomatch",
			"/tasks/task_"+last+"?queue="+q)
	}
	for _, page := range append([]string{"/"}, pages...) {
		b.Run(strings.NewReplacer("/", "_", "?", "_", "&", "_", "=", "-").Replace(page), func(b *testing.B) {
			for b.Loop() {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, page, nil))
				if rec.Code != http.StatusOK {
					b.Fatalf("GET %s: %d\n%s", page, rec.Code, rec.Body.String())
				}
			}
		})
	}
}

// BenchmarkDeleteAllPending times Server.DeleteAllTasks on 100,000
// pending tasks (their FAILURE states written), and reports the longest
// any one Redis command took meanwhile (SLOWLOG): the page of 1,000 a
// script run takes bounds how long Redis is held.
//
//	go test -run '^$' -bench DeleteAllPending -benchtime 3x ./cmd/machinist
func BenchmarkDeleteAllPending(b *testing.B) {
	srv := redistest.Start(b)
	rdb := srv.Client(b)
	ctx := context.Background()
	server, err := machinery.NewServer(&config.Config{Broker: srv.URL(), NoUnixSignals: true, Redis: &config.RedisConfig{KeyPrefix: "bulk"}})
	if err != nil {
		b.Fatal(err)
	}
	defer server.Close()
	const n = 100_000
	var held time.Duration
	for b.Loop() {
		b.StopTimer()
		sigs := make([]*tasks.Signature, n)
		for i := range sigs {
			sigs[i] = &tasks.Signature{Name: "send", RoutingKey: "mail", Args: []tasks.Arg{{Type: "int64", Value: i}}}
		}
		if _, err := server.SendTasks(ctx, sigs); err != nil {
			b.Fatal(err)
		}
		for _, c := range [][]any{{"config", "set", "slowlog-log-slower-than", "0"}, {"config", "set", "slowlog-max-len", "1000000"}, {"slowlog", "reset"}} {
			if err := rdb.Do(ctx, c...).Err(); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
		got, err := server.DeleteAllTasks(ctx, "mail", "pending")
		b.StopTimer()
		if err != nil || got != n {
			b.Fatalf("deleted %d, %v; want %d", got, err, n)
		}
		logs, err := rdb.SlowLogGet(ctx, -1).Result()
		if err != nil {
			b.Fatal(err)
		}
		for _, l := range logs {
			held = max(held, l.Duration)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "tasks/s")
	b.ReportMetric(float64(held.Microseconds())/1000, "max-command-ms")
}
