package periodic

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/b6192125/machinist/internal/store"
	"github.com/b6192125/machinist/v1/tasks"
)

// AddTask sends a copy of signature on the cron schedule spec; see
// machinery's Server.RegisterPeriodicTask. It returns service.ErrStopped
// once the scheduler is stopped.
func (sc *Scheduler) AddTask(spec, name string, signature *tasks.Signature) error {
	if err := signature.Validate(); err != nil {
		return fmt.Errorf("machinist: periodic task %q: %w", name, err)
	}
	info := entryInfo{kind: "task", sigs: []*tasks.Signature{signature}, outcome: func(t Tick) store.PeriodicTick {
		return store.PeriodicTick{At: t.At, Task: t.UUID("task_", "/0")}
	}}
	return sc.add(spec, name, info, func(ctx context.Context, t Tick) error {
		sig := t.copies("", signature)[0]
		return sc.sendOnce(ctx, t, sig, func(ctx context.Context) error {
			return sc.server.SendTask(ctx, sig)
		})
	})
}

// AddChain sends a chain of copies of signatures on the schedule spec;
// see AddTask.
func (sc *Scheduler) AddChain(spec, name string, signatures ...*tasks.Signature) error {
	if _, err := tasks.NewChain(tasks.CopySignatures(signatures...)...); err != nil {
		return fmt.Errorf("machinist: periodic chain %q: %w", name, err)
	}
	info := entryInfo{kind: "chain", sigs: signatures, outcome: func(t Tick) store.PeriodicTick {
		return store.PeriodicTick{At: t.At, Task: t.UUID("task_", "/"+strconv.Itoa(len(signatures)-1))}
	}}
	return sc.add(spec, name, info, func(ctx context.Context, t Tick) error {
		chain, err := tasks.NewChain(t.copies("", signatures...)...)
		if err != nil {
			return err
		}
		return sc.sendOnce(ctx, t, chain.Tasks[0], func(ctx context.Context) error {
			return sc.server.SendChain(ctx, chain)
		})
	})
}

// AddGroup sends a group of copies of signatures on the schedule spec;
// see AddTask.
func (sc *Scheduler) AddGroup(spec, name string, sendConcurrency int, signatures ...*tasks.Signature) error {
	if _, err := tasks.NewGroup(tasks.CopySignatures(signatures...)...); err != nil {
		return fmt.Errorf("machinist: periodic group %q: %w", name, err)
	}
	info := entryInfo{kind: "group", sigs: signatures, outcome: func(t Tick) store.PeriodicTick {
		return store.PeriodicTick{At: t.At, Group: t.UUID("group_", "group"), GroupCount: len(signatures)}
	}}
	return sc.add(spec, name, info, func(ctx context.Context, t Tick) error {
		group, err := t.group(signatures...)
		if err != nil {
			return err
		}
		return sc.sendGroupOnce(ctx, t, group, nil, sendConcurrency, func(ctx context.Context) error {
			return sc.server.SendGroup(ctx, group, sendConcurrency)
		})
	})
}

// AddChord sends a chord of copies of signatures and callback on the
// schedule spec; see AddTask.
func (sc *Scheduler) AddChord(spec, name string, sendConcurrency int, callback *tasks.Signature, signatures ...*tasks.Signature) error {
	build := func(t Tick) (*tasks.Chord, error) {
		group, err := t.group(signatures...)
		if err != nil {
			return nil, err
		}
		cb := t.copies("callback", callback)[0]
		if cb != nil {
			cb.UUID = t.UUID("chord_", "callback")
		}
		return tasks.NewChord(group, cb)
	}
	if _, err := build(Tick{}); err != nil {
		return fmt.Errorf("machinist: periodic chord %q: %w", name, err)
	}
	info := entryInfo{kind: "chord", sigs: append(slices.Clone(signatures), callback), outcome: func(t Tick) store.PeriodicTick {
		return store.PeriodicTick{At: t.At, Task: t.UUID("chord_", "callback")}
	}}
	return sc.add(spec, name, info, func(ctx context.Context, t Tick) error {
		chord, err := build(t)
		if err != nil {
			return err
		}
		return sc.sendGroupOnce(ctx, t, chord.Group, chord.Callback, sendConcurrency, func(ctx context.Context) error {
			return sc.server.SendChord(ctx, chord, sendConcurrency)
		})
	})
}

// sendOnce sends root, a tick's task or its chain's first task, with send;
// on a resend, only if no earlier attempt sent it.
func (sc *Scheduler) sendOnce(ctx context.Context, t Tick, root *tasks.Signature, send func(context.Context) error) error {
	if !t.resend {
		return send(ctx)
	}
	unsent, err := sc.unsent(ctx, "", []*tasks.Signature{root})
	if err != nil || len(unsent) == 0 {
		return err
	}
	if err := send(ctx); err != nil && !errors.Is(err, store.ErrDuplicateTask) {
		return err
	}
	return nil
}

// sendGroupOnce sends group, or the chord of group and callback, with
// send; on a resend, only the members no earlier attempt sent: all of
// them with send when it sent none, else those alone, published as
// SendGroup publishes its members.
func (sc *Scheduler) sendGroupOnce(ctx context.Context, t Tick, group *tasks.Group, callback *tasks.Signature, sendConcurrency int, send func(context.Context) error) error {
	if !t.resend {
		return send(ctx)
	}
	if callback != nil {
		sc.server.Prepare(callback) // as SendChord did
	}
	unsent, err := sc.unsent(ctx, group.GroupUUID, group.Tasks)
	switch {
	case err != nil:
		return err
	case len(unsent) == 0:
		return nil
	case len(unsent) == len(group.Tasks):
		return send(ctx)
	}
	if err := sc.server.PublishMembers(ctx, unsent, sendConcurrency); err != nil {
		return fmt.Errorf("machinist: send the rest of group %s: %w", group.GroupUUID, err)
	}
	return nil
}

// unsent returns those of roots, a tick's task, its chain's first task or
// its group's members (groupUUID), that no earlier attempt at the tick
// sent. A root was sent when the broker holds it, or when it has left the
// broker, which it does once a worker has written its final state: then
// its state is past PENDING, and a group member's is in the group's
// bookkeeping. The broker is asked first, so that a root leaving it
// before the states are read is seen there.
func (sc *Scheduler) unsent(ctx context.Context, groupUUID string, roots []*tasks.Signature) ([]*tasks.Signature, error) {
	for _, r := range roots {
		sc.server.Prepare(r) // the queue it was sent to
	}
	held, err := sc.server.Store().Holds(ctx, roots...)
	if errors.Is(err, store.ErrUnsupported) {
		return roots, nil // no claims, no resends
	}
	if err != nil {
		return nil, fmt.Errorf("machinist: periodic resend: which tasks the broker holds: %w", err)
	}
	var rest []*tasks.Signature
	for i, r := range roots {
		if !held[i] {
			rest = append(rest, r)
		}
	}
	if len(rest) == 0 {
		return nil, nil
	}
	ran, err := sc.ran(ctx, groupUUID, len(roots), rest)
	if err != nil {
		return nil, fmt.Errorf("machinist: periodic resend: task states: %w", err)
	}
	unsent := rest[:0]
	for _, r := range rest {
		if !ran[r.UUID] {
			unsent = append(unsent, r)
		}
	}
	return unsent, nil
}

// ran returns the UUIDs of those of sigs whose state is past PENDING: read
// from the bookkeeping of their group (groupUUID, of count members) or,
// outside a group, from each state.
func (sc *Scheduler) ran(ctx context.Context, groupUUID string, count int, sigs []*tasks.Signature) (map[string]bool, error) {
	backend := sc.server.Store()
	ran := make(map[string]bool)
	if groupUUID != "" {
		states, err := backend.GroupTaskStatesContext(ctx, groupUUID, count)
		if errors.Is(err, store.ErrGroupNotFound) {
			return ran, nil // recorded before any member is sent: none was
		}
		if err != nil {
			return nil, err
		}
		for _, st := range states {
			if st.State != tasks.StatePending {
				ran[st.TaskUUID] = true
			}
		}
		return ran, nil
	}
	for _, sig := range sigs {
		st, err := backend.GetStateContext(ctx, sig.UUID)
		switch {
		case errors.Is(err, store.ErrStateNotFound):
		case err != nil:
			return nil, err
		case st.State != tasks.StatePending:
			ran[sig.UUID] = true
		}
	}
	return ran, nil
}
