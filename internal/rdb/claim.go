package rdb

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/b6192125/machinist/internal/rdb/transport"
	"github.com/b6192125/machinist/internal/store"
	"github.com/b6192125/machinist/v1/tasks"
)

// ClaimLease takes the claim name for lease unless another lease on it runs
// or it is done, and keeps its key for keep (see store.Claimer and
// lua/claim_lease.lua). The call's token lets a run sent again after a lost
// reply recognise the first run's lease as its own.
func (s *Store) ClaimLease(ctx context.Context, name string, lease, keep time.Duration) (store.ClaimResult, error) {
	if lease < time.Millisecond {
		return store.ClaimResult{}, fmt.Errorf("claim %s: lease %v is shorter than 1ms", name, lease)
	}
	key, token := s.keys.claim(name), randomHex(12)
	args := []interface{}{token, lease.Milliseconds(), max(keep, lease).Milliseconds()}
	var cmd *goredis.Cmd
	err := transport.Again(ctx, func() error {
		cmd = s.repl.Eval(ctx, s.client, false, claimLeaseScript, []string{key}, args)
		return cmd.Err()
	}, transport.Retry{})
	var res store.ClaimResult
	if err == nil {
		res, err = parseClaimLeaseReply(cmd.Val())
	}
	if err != nil {
		return store.ClaimResult{}, fmt.Errorf("claim %s: %w", name, err)
	}
	if res.Status == store.ClaimWon {
		res.Token = token
	}
	return res, nil
}

// Status codes of claim_lease.
const (
	claimWon       = 0
	claimTakenOver = 1
	claimHeld      = 2
	claimDone      = 3
)

// parseClaimLeaseReply decodes claim_lease's {status, ms}.
func parseClaimLeaseReply(v interface{}) (store.ClaimResult, error) {
	const script = "claim_lease"
	arr, err := asArray(script, v)
	if err != nil {
		return store.ClaimResult{}, err
	}
	if len(arr) != 2 {
		return store.ClaimResult{}, malformed(script, nil, "%s, want 2 elements", describe(v))
	}
	code, err := asInt(script, elem(0, "status"), arr[0])
	if err != nil {
		return store.ClaimResult{}, err
	}
	ms, err := asInt(script, elem(1, "ms"), arr[1])
	if err != nil {
		return store.ClaimResult{}, err
	}
	switch code {
	case claimWon, claimTakenOver:
		return store.ClaimResult{Status: store.ClaimWon, TakenOver: code == claimTakenOver}, nil
	case claimHeld:
		if ms <= 0 {
			return store.ClaimResult{}, malformed(script, nil, "held for %d ms, want a positive time", ms)
		}
		return store.ClaimResult{Status: store.ClaimHeld, Remaining: time.Duration(ms) * time.Millisecond}, nil
	case claimDone:
		return store.ClaimResult{Status: store.ClaimDone}, nil
	default:
		return store.ClaimResult{}, malformed(script, nil, "status %d, want 0 to 3", code)
	}
}

// CompleteClaim marks the claim name done for the holder of token (see
// store.Claimer and lua/complete_claim.lua); safe to send again.
func (s *Store) CompleteClaim(ctx context.Context, name, token string) error {
	var cmd *goredis.Cmd
	err := transport.Again(ctx, func() error {
		cmd = s.repl.Eval(ctx, s.client, false, completeClaimScript, []string{s.keys.claim(name)}, []interface{}{token})
		return cmd.Err()
	}, transport.Retry{})
	var code int64
	if err == nil {
		code, err = parseStatusReply("complete_claim", cmd.Val(), 0, 1)
	}
	if err != nil {
		return fmt.Errorf("complete claim %s: %w", name, err)
	}
	if code == 1 {
		return fmt.Errorf("complete claim %s: %w", name, store.ErrLeaseLost)
	}
	return nil
}

// Holds reports, for each of sigs, whether its queue (RoutingKey; any
// shard of a sharded queue) holds a task with its UUID, as enqueue's duplicate check (lib/queue.lua's held) sees it: a
// task hash that is not archived. One round trip (on Cluster, one per
// node).
func (s *Store) Holds(ctx context.Context, sigs []*tasks.Signature) ([]bool, error) {
	if len(sigs) == 0 {
		return nil, nil
	}
	queues := make([][]string, len(sigs))
	for i, sig := range sigs {
		if sig == nil {
			return nil, fmt.Errorf("holds: task %d: %w", i, tasks.ErrNilSignature)
		}
		// Every shard: the one a send now would choose may not be the one
		// an earlier send chose, if the shards grew in between.
		names, err := s.Shards(ctx, sig.RoutingKey)
		if err != nil {
			return nil, fmt.Errorf("holds: task %s: %w", sig.UUID, err)
		}
		queues[i] = names
	}
	cmds := make([][]*goredis.StringCmd, len(sigs))
	err := transport.Again(ctx, func() error {
		_, err := s.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
			for i, sig := range sigs {
				cmds[i] = make([]*goredis.StringCmd, len(queues[i]))
				for j, q := range queues[i] {
					cmds[i][j] = p.HGet(ctx, s.keys.queue(q).task+sig.UUID, "state")
				}
			}
			return nil
		})
		if errors.Is(err, goredis.Nil) {
			return nil // a task hash that is missing: reported per command
		}
		return err
	}, transport.Retry{})
	if err != nil {
		return nil, fmt.Errorf("holds: %w", err)
	}
	out := make([]bool, len(sigs))
	for i, shards := range cmds {
		for _, cmd := range shards {
			state, err := cmd.Result()
			switch {
			case errors.Is(err, goredis.Nil):
			case err != nil:
				return nil, fmt.Errorf("holds: task %s: %w", sigs[i].UUID, err)
			default:
				out[i] = out[i] || state != "archived" && state != "cancelled"
			}
		}
	}
	return out, nil
}

// The record of periodic entries: one hash, a field "<name>\n<spec>" per
// entry with its JSON (store.PeriodicEntry without Last), and a field
// "<name>\n<spec>\nlast" with its last tick's (store.PeriodicTick).

// RecordPeriodic records e's definition, leaving its last tick as it was.
func (s *Store) RecordPeriodic(ctx context.Context, e *store.PeriodicEntry) error {
	def := *e
	def.Last = store.PeriodicTick{}
	raw, err := json.Marshal(&def)
	if err != nil {
		return fmt.Errorf("record periodic %q: %w", e.Name, err)
	}
	if err := s.client.HSet(ctx, s.keys.periodic(), e.Name+"\n"+e.Spec, raw).Err(); err != nil {
		return fmt.Errorf("record periodic %q: %w", e.Name, err)
	}
	return nil
}

// RecordPeriodicTick records the tick of entry name, spec sent last.
func (s *Store) RecordPeriodicTick(ctx context.Context, name, spec string, last store.PeriodicTick) error {
	raw, err := json.Marshal(&last)
	if err != nil {
		return fmt.Errorf("record periodic %q's tick: %w", name, err)
	}
	if err := s.client.HSet(ctx, s.keys.periodic(), name+"\n"+spec+"\nlast", raw).Err(); err != nil {
		return fmt.Errorf("record periodic %q's tick: %w", name, err)
	}
	return nil
}

// PeriodicEntries lists the periodic entries recorded, by name and spec.
func (s *Store) PeriodicEntries(ctx context.Context) ([]*store.PeriodicEntry, error) {
	fields, err := s.client.HGetAll(ctx, s.keys.periodic()).Result()
	if err != nil {
		return nil, fmt.Errorf("list periodic entries: %w", err)
	}
	var out []*store.PeriodicEntry
	for field, raw := range fields {
		if strings.HasSuffix(field, "\nlast") {
			continue
		}
		e := &store.PeriodicEntry{}
		if err := json.Unmarshal([]byte(raw), e); err != nil {
			return nil, fmt.Errorf("list periodic entries: %q: %w", field, err)
		}
		if last, ok := fields[field+"\nlast"]; ok {
			if err := json.Unmarshal([]byte(last), &e.Last); err != nil {
				return nil, fmt.Errorf("list periodic entries: %q's last tick: %w", field, err)
			}
		}
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b *store.PeriodicEntry) int {
		return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.Spec, b.Spec))
	})
	return out, nil
}
