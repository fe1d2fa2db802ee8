package common_test

import (
	"strings"
	"testing"

	"github.com/gomodule/redigo/redis"

	"github.com/b6192125/machinist/internal/redistest"
	"github.com/b6192125/machinist/v1/common"
	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/tasks"
)

func TestBrokerNamesAndRoutingKey(t *testing.T) {
	t.Parallel()
	b := common.NewBroker(&config.Config{DefaultQueue: "queue"})
	b.SetRegisteredTaskNames([]string{"foo", "bar"})
	if !b.IsTaskRegistered("foo") || b.IsTaskRegistered("bogus") {
		t.Fatal("IsTaskRegistered does not follow the names set")
	}
	if got := b.GetRegisteredTaskNames(); len(got) != 2 || got[0] != "foo" || got[1] != "bar" {
		t.Fatalf("GetRegisteredTaskNames = %v", got)
	}
	s := &tasks.Signature{RoutingKey: "own"}
	b.AdjustRoutingKey(s)
	if s.RoutingKey != "own" {
		t.Fatalf("a routing key was replaced by %q", s.RoutingKey)
	}
	s.RoutingKey = ""
	b.AdjustRoutingKey(s)
	if s.RoutingKey != "queue" {
		t.Fatalf("an empty routing key became %q; want the default queue", s.RoutingKey)
	}
	if err := b.Publish(s); err != common.ErrNotImplemented {
		t.Fatalf("Publish: %v", err)
	}
	if _, err := b.GetPendingTasks(""); err != common.ErrNotImplemented {
		t.Fatalf("GetPendingTasks: %v", err)
	}
	if _, err := b.GetDelayedTasks(); err != common.ErrNotImplemented {
		t.Fatalf("GetDelayedTasks: %v", err)
	}
}

// StopConsuming closes the stop channel, may be called again (machinery's
// panics); a StartConsuming after it finds it closed, until
// RearmConsuming.
func TestBrokerStopsAndStartsAgain(t *testing.T) {
	t.Parallel()
	b := common.NewBroker(&config.Config{DefaultQueue: "queue"})
	b.StartConsuming("", 1, nil)
	if !b.GetRetry() || b.GetRetryFunc() == nil {
		t.Fatal("StartConsuming did not arm retries")
	}
	first := b.GetStopChan()
	b.StopConsuming()
	b.StopConsuming()
	select {
	case <-first:
	default:
		t.Fatal("StopConsuming did not close the stop channel")
	}
	if b.GetRetry() {
		t.Fatal("GetRetry after StopConsuming")
	}
	b.StartConsuming("", 1, nil)
	select {
	case <-b.GetStopChan():
	default:
		t.Fatal("StartConsuming after a stop opened the stop channel again")
	}
	b.RearmConsuming()
	select {
	case <-b.GetStopChan():
		t.Fatal("RearmConsuming left the stop channel closed")
	default:
	}
	if !b.GetRetry() {
		t.Fatal("RearmConsuming did not arm retries again")
	}
}

func TestBackend(t *testing.T) {
	t.Parallel()
	cnf := &config.Config{}
	b := common.NewBackend(cnf)
	if b.GetConfig() != cnf || b.IsAMQP() {
		t.Fatal("Backend: wrong config or IsAMQP")
	}
}

// NewPool's connections reach the server, select the database and, with
// a config, take its pool sizes.
func TestRedisConnector(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	var rc common.RedisConnector
	pool := rc.NewPool("", srv.Addr(), "", "", 3, &config.RedisConfig{MaxIdle: 2, MaxActive: 4, ClientName: "connector-test"}, nil)
	defer pool.Close()
	if pool.MaxIdle != 2 || pool.MaxActive != 4 {
		t.Fatalf("pool sized %d idle, %d active; want the config's 2 and 4", pool.MaxIdle, pool.MaxActive)
	}
	conn := pool.Get()
	defer conn.Close()
	if _, err := conn.Do("SET", "connector", "here"); err != nil {
		t.Fatal(err)
	}
	c := srv.Client(t)
	info, err := c.Do(t.Context(), "CLIENT", "LIST").Text()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(info, "name=connector-test") || !strings.Contains(info, "db=3") {
		t.Fatalf("CLIENT LIST has no connection named connector-test on db 3:\n%s", info)
	}
	got, err := redis.String(conn.Do("GET", "connector"))
	if err != nil || got != "here" {
		t.Fatalf("GET = %q, %v", got, err)
	}

	defaults := rc.NewPool("", srv.Addr(), "", "", 0, nil, nil)
	defer defaults.Close()
	if defaults.MaxIdle != 10 || defaults.MaxActive != 100 || !defaults.Wait {
		t.Fatalf("a nil config gave %d idle, %d active, wait %t; want machinery's 10, 100, true",
			defaults.MaxIdle, defaults.MaxActive, defaults.Wait)
	}
	dc := defaults.Get()
	defer dc.Close()
	if _, err := dc.Do("PING"); err != nil {
		t.Fatal(err)
	}
}
