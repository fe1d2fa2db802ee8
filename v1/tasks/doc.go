// Package tasks describes tasks and turns them into function calls: the
// Signature that travels through the broker, the workflows built from
// signatures, the results and states a backend stores, and the reflection
// that calls a registered Go function with a signature's arguments. It is
// compatible with github.com/RichardKnop/machinery/v1/tasks: the same
// names, and the same JSON on the wire, so machinery and machinist
// processes can exchange messages.
//
// # Signatures
//
// A Signature names a registered task and carries its arguments and
// options (queue, ETA, retries, callbacks). It is encoded as JSON with the
// Go field names as keys (EncodeSignature) and decoded with numbers kept as
// json.Number (DecodeSignature), so a large int64 is never rounded through
// a float64:
//
//	sig, err := tasks.NewSignature("add", []tasks.Arg{
//		{Type: "int64", Value: 1},
//		{Type: "int64", Value: 2},
//	})
//
// Copy a signature with CopySignature before changing one that is in use;
// the copy shares no memory with the original.
//
// # Args and the 29 types
//
// Every Arg has a Type, which is one of 29 strings: bool, int, int8, int16,
// int32, int64, uint, uint8, uint16, uint32, uint64, float32, float64,
// string, and []T of each of those, plus []byte (the same Go type as
// []uint8, written as base64 in JSON). Any other Type (a map, a struct,
// time.Time, [][]int) is an ErrUnsupportedType: encode such values
// yourself, as a string or []byte.
//
// ReflectValue converts a Value to its Type. It takes what JSON decoding
// produces (json.Number, string, bool, []interface{}) as well as Go values
// of any numeric kind that fit exactly, so Value: 1 with Type "int64" works
// whether or not the message went through JSON. A value that does not fit
// (300 as int8, -1 as uint, 1.5 as int, "1" as int) is an error wrapping
// ErrArgs that says "<value> is not <type>" and why.
//
// # Calling a task
//
// A task function takes an optional first context.Context parameter and
// then one parameter per Arg, and returns any number of values of which
// the last is an error (ValidateTask checks this). NewWithContext converts
// and checks the args against the function (ReflectArgs): the count must
// match, and each arg must be usable as its parameter; an arg of another
// numeric type is converted when the value fits exactly, so Type "int64"
// serves a parameter of type int. A mismatch is an error wrapping ErrArgs,
// before the function runs:
//
//	task, err := tasks.NewWithContext(ctx, add, sig)
//	if err != nil {
//		return err // errors.Is(err, tasks.ErrArgs)
//	}
//	results, err := task.Call()
//
// The context passed to the function is the worker's: it carries the task's
// deadline and is cancelled on shutdown, and SignatureFromContext(ctx)
// returns the signature being run (its UUID, Name, RetryCount, Headers).
//
// Call recovers a panic in the function and returns it as a *PanicError,
// which holds the stack; its message is the panic's error or string, as
// in machinery, and other panic values wrap ErrTaskPanicked.
//
// # Results
//
// Each return value but the error becomes a TaskResult holding its Go type
// name and value. A function that returns only an error gives an empty,
// non-nil slice. When results come back from a backend, ReflectTaskResults
// turns them into reflect.Values again (values of the 29 types get their
// Go type back; others are returned as decoded) and HumanReadableResults
// formats them for a log line.
//
// # Workflows
//
// NewChain links signatures so that each runs after the previous one
// succeeded, with the previous one's results appended to its args unless
// it is Immutable. NewGroup gives signatures a common "group_" GroupUUID so
// they run in parallel and can be awaited together. NewChord adds a
// callback that runs once, with every member's results in group order,
// after the whole group succeeded.
//
// # Workflows of any shape
//
// A Workflow nests chains, groups and chords in each other, or joins
// nodes in a DAG, and compiles them into one graph of signatures.
// ChainOf, GroupOf and ChordOf describe the workflows to nest; NewChainOf,
// NewGroupOf, NewChordOf and DAG.Build build the outermost one, checking
// the whole and naming the place of any mistake:
//
//	wf, err := tasks.NewChainOf(
//		fetch,
//		tasks.GroupOf(resizeA, resizeB, resizeC),
//		tasks.ChordOf(tasks.GroupOf(upload1, upload2), tasks.ChainOf(index, notify)),
//	)
//
//	dag, err := tasks.NewDAG("report").
//		Add("a", extract).
//		Add("b", cleanUsers, "a").
//		Add("c", cleanOrders, "a").
//		Add("d", join, "b", "c"). // d gets b's results, then c's
//		Build()
//
// Results follow machinery's rules: a step's results are appended to the
// next step's args unless it is Immutable; after a group, in group order;
// in a DAG, each dependency's in the order the dependencies were given.
// Workflow.Nodes lists the graph, each node under a key that says where it
// sits ("2.cb.0": the first step of the callback of the chord that is the
// third step), with the keys of the nodes it gets results from; see
// WorkflowNode. The signatures are copied into the graph, the caller's
// are left as they are. Server.SendWorkflowWithContext sends a Workflow,
// and a node that fails for good fails it (docs/workflows.md).
//
// # Retries
//
// A failing task runs again while its RetryCount lasts, after RetryTimeout
// seconds, growing along the Fibonacci sequence. A task can also ask to
// run again after a given delay, whatever its RetryCount, by returning an
// error that implements Retriable, such as NewErrRetryTaskLater:
//
//	return tasks.NewErrRetryTaskLater("rate limited", 30*time.Second)
//
// Call returns the error unchanged, and the worker finds a Retriable with
// errors.As, so it may be wrapped with fmt.Errorf and %w (machinery
// recognises only the unwrapped ErrRetryTaskLater).
package tasks
