package redisbroker

import (
	"context"
	"embed"
	"fmt"

	goredis "github.com/redis/go-redis/v9"

	"github.com/b6192125/machinist/v1/brokers/iface"
)

//go:embed lua/*.lua
var luaFiles embed.FS

func loadScript(name string) *goredis.Script {
	src, err := luaFiles.ReadFile("lua/" + name + ".lua")
	if err != nil {
		panic(fmt.Sprintf("redisbroker: missing embedded script %s: %v", name, err))
	}
	return goredis.NewScript(string(src))
}

// The scripts, one per atomic transition. Each file opens with its KEYS,
// ARGV and return contract.
var (
	enqueueScript         = loadScript("enqueue")
	dequeueScript         = loadScript("dequeue")
	extendScript          = loadScript("extend")
	ackScript             = loadScript("ack")
	ackSuccessScript      = loadScript("ack_success")
	retryScript           = loadScript("retry")
	archiveScript         = loadScript("archive")
	requeueScript         = loadScript("requeue")
	forwardScript         = loadScript("forward")
	recoverScript         = loadScript("recover")
	requeueArchivedScript = loadScript("requeue_archived")
	deleteArchivedScript  = loadScript("delete_archived")
)

// Status codes the settling scripts return.
const (
	statusOK        = 0
	statusDuplicate = 1
	statusLeaseLost = 2
)

// statusError maps a script's status code to an error for task id.
func statusError(code int64, id string) error {
	switch code {
	case statusOK:
		return nil
	case statusDuplicate:
		return fmt.Errorf("redisbroker: task %s: %w", id, iface.ErrDuplicateTask)
	case statusLeaseLost:
		return fmt.Errorf("redisbroker: task %s: %w", id, iface.ErrLeaseLost)
	default:
		return fmt.Errorf("redisbroker: task %s: unexpected script status %d", id, code)
	}
}

// runStatus runs a settling script and maps its status code.
func runStatus(ctx context.Context, c goredis.UniversalClient, s *goredis.Script, id string, keys []string, args ...interface{}) error {
	code, err := s.Run(ctx, c, keys, args...).Int64()
	if err != nil {
		return fmt.Errorf("redisbroker: task %s: %w", id, err)
	}
	return statusError(code, id)
}
