package redisbackend

import (
	"embed"
	"fmt"

	goredis "github.com/redis/go-redis/v9"

	"github.com/b6192125/machinist/v1/backends/iface"
)

//go:embed lua/*.lua
var luaFiles embed.FS

func loadScript(name string) *goredis.Script {
	src, err := luaFiles.ReadFile("lua/" + name + ".lua")
	if err != nil {
		panic(fmt.Sprintf("redisbackend: missing embedded script %s: %v", name, err))
	}
	return goredis.NewScript(string(src))
}

// The scripts, one per atomic change of a group's bookkeeping. Each file
// opens with its KEYS, ARGV and return contract.
var (
	groupDoneScript    = loadScript("group_done")
	initGroupScript    = loadScript("init_group")
	triggerChordScript = loadScript("trigger_chord")
)

// Status codes trigger_chord returns.
const (
	chordLost     = 0
	chordElected  = 1
	chordNotFound = 2
)

// chordResult maps trigger_chord's status code to TriggerChord's answer.
func chordResult(code int64, groupUUID, memberUUID string) (bool, error) {
	switch code {
	case chordElected:
		return true, nil
	case chordLost:
		return false, nil
	case chordNotFound:
		return false, fmt.Errorf("redisbackend: trigger chord of group %s: %w", groupUUID, iface.ErrGroupNotFound)
	default:
		return false, fmt.Errorf("redisbackend: trigger chord of group %s by task %s: unexpected script status %d", groupUUID, memberUUID, code)
	}
}
