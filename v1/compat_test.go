package machinery_test

import (
	"context"
	"errors"
	"reflect"
	"time"

	"github.com/b6192125/machinist/v1"
	backends "github.com/b6192125/machinist/v1/backends/iface"
	"github.com/b6192125/machinist/v1/backends/result"
	brokers "github.com/b6192125/machinist/v1/brokers/iface"
	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/log"
	"github.com/b6192125/machinist/v1/retry"
	"github.com/b6192125/machinist/v1/tasks"
)

// machineryProgram uses every name of machinery v1's API that DESIGN.md's
// compatibility contract lists, with machinery's signatures, the way a
// machinery program does. It is compiled with the tests, so a change that
// breaks the contract fails the build; it is not run.
func machineryProgram() error {
	cnf, err := config.NewFromYaml("config.yml", false)
	if err != nil {
		if cnf, err = config.NewFromEnvironment(); err != nil {
			return err
		}
	}
	cnf = &config.Config{
		Broker:          "redis://localhost:6379",
		DefaultQueue:    "machinery_tasks",
		ResultBackend:   "redis://localhost:6379",
		ResultsExpireIn: config.DefaultResultsExpireIn,
		AMQP:            &config.AMQPConfig{Exchange: "machinery_exchange", ExchangeType: "direct", BindingKey: "machinery_task"},
		Redis:           &config.RedisConfig{MaxIdle: 3, IdleTimeout: 240, ReadTimeout: 15, WriteTimeout: 15, ConnectTimeout: 15, NormalTasksPollPeriod: 1000, DelayedTasksPollPeriod: 500},
		NoUnixSignals:   true,
		SQS:             &config.SQSConfig{WaitTimeSeconds: 10},
		GCPPubSub:       &config.GCPPubSubConfig{MaxExtension: time.Minute},
		MongoDB:         &config.MongoDBConfig{Database: "machinery"},
		DynamoDB:        &config.DynamoDBConfig{TaskStatesTable: "task_states", GroupMetasTable: "group_metas"},
	}
	server, err := machinery.NewServer(cnf)
	if err != nil {
		log.FATAL.Fatalln(err)
	}
	log.Set(log.INFO)
	log.SetDebug(log.DEBUG)
	log.SetInfo(log.INFO)
	log.SetWarning(log.WARNING)
	log.SetError(log.ERROR)
	log.SetFatal(log.FATAL)
	log.INFO.Println("server ready")
	log.ERROR.Printf("%v", errors.New("x"))
	_ = retry.FibonacciNext(retry.Fibonacci()())
	retry.Closure()(make(chan int))
	if err := server.RegisterTasks(map[string]interface{}{"add": func(args ...int64) (int64, error) { return 0, nil }}); err != nil {
		return err
	}
	if err := server.RegisterTask("multiply", func(ctx context.Context, a, b int64) (int64, error) { return a * b, nil }); err != nil {
		return err
	}
	_ = server.IsTaskRegistered("add")
	_, _ = server.GetRegisteredTask("add")
	_ = server.GetRegisteredTaskNames()
	server.SetBroker(server.GetBroker())
	server.SetBackend(server.GetBackend())
	server.SetConfig(server.GetConfig())
	server.SetPreTaskHandler(func(*tasks.Signature) {})

	sig, err := tasks.NewSignature("add", []tasks.Arg{{Name: "a", Type: "int64", Value: 1}})
	if err != nil {
		return err
	}
	sig.Headers = tasks.Headers{}
	sig.Headers.Set("k", "v")
	_ = sig.Headers.ForeachKey(func(k, v string) error { return nil })
	var asyncResult *result.AsyncResult
	if asyncResult, err = server.SendTask(sig); err != nil {
		return err
	}
	if asyncResult, err = server.SendTaskWithContext(context.Background(), tasks.CopySignature(sig)); err != nil {
		return err
	}
	var values []reflect.Value
	values, err = asyncResult.Get(time.Millisecond)
	values, err = asyncResult.GetWithTimeout(time.Second, time.Millisecond)
	values, err = asyncResult.Touch()
	var state *tasks.TaskState = asyncResult.GetState()
	_ = state.IsCompleted() || state.IsSuccess() || state.IsFailure()
	_ = []string{tasks.StatePending, tasks.StateReceived, tasks.StateStarted, tasks.StateRetry, tasks.StateSuccess, tasks.StateFailure}
	_ = tasks.HumanReadableResults(values)

	chain, _ := tasks.NewChain(tasks.CopySignatures(sig, sig)...)
	var chainResult *result.ChainAsyncResult
	chainResult, err = server.SendChain(chain)
	chainResult, err = server.SendChainWithContext(context.Background(), chain)
	values, err = chainResult.Get(time.Millisecond)
	values, err = chainResult.GetWithTimeout(time.Second, time.Millisecond)

	group, _ := tasks.NewGroup(tasks.CopySignatures(sig, sig)...)
	_ = group.GetUUIDs()
	var groupResults []*result.AsyncResult
	groupResults, err = server.SendGroup(group, 10)
	groupResults, err = server.SendGroupWithContext(context.Background(), group, 10)
	_ = groupResults
	chord, _ := tasks.NewChord(group, tasks.CopySignature(sig))
	var chordResult *result.ChordAsyncResult
	chordResult, err = server.SendChord(chord, 10)
	chordResult, err = server.SendChordWithContext(context.Background(), chord, 10)
	values, err = chordResult.Get(time.Millisecond)
	values, err = chordResult.GetWithTimeout(time.Second, time.Millisecond)

	_ = server.RegisterPeriodicTask("*/5 * * * *", "periodic-task", sig)
	_ = server.RegisterPeriodicChain("*/5 * * * *", "periodic-chain", sig, sig)
	_ = server.RegisterPeriodicGroup("*/5 * * * *", "periodic-group", 10, sig, sig)
	_ = server.RegisterPeriodicChord("*/5 * * * *", "periodic-chord", 10, sig, sig, sig)

	worker := server.NewWorker("machinery_worker", 0)
	worker = server.NewCustomQueueWorker("machinery_worker", 10, "custom")
	_, _, _ = worker.ConsumerTag, worker.Concurrency, worker.Queue
	worker.SetErrorHandler(func(err error) {})
	worker.SetPreTaskHandler(func(*tasks.Signature) {})
	worker.SetPostTaskHandler(func(*tasks.Signature) {})
	worker.SetPreConsumeHandler(func(*machinery.Worker) bool { return true })
	_ = worker.Process(sig)
	errorsChan := make(chan error, 1)
	worker.LaunchAsync(errorsChan)
	worker.Quit()
	if err := worker.Launch(); errors.Is(err, machinery.ErrWorkerQuitGracefully) || errors.Is(err, machinery.ErrWorkerQuitAbruptly) {
		return err
	}

	// The seams: machinery's methods on GetBackend() and GetBroker().
	var backend backends.Backend = server.GetBackend()
	var done bool
	var states []*tasks.TaskState
	err = backend.InitGroup("group", []string{sig.UUID})
	done, err = backend.GroupCompleted("group", 1)
	states, err = backend.GroupTaskStates("group", 1)
	done, err = backend.TriggerChord("group")
	err = backend.SetStatePending(sig)
	err = backend.SetStateReceived(sig)
	err = backend.SetStateStarted(sig)
	err = backend.SetStateRetry(sig)
	err = backend.SetStateSuccess(sig, []*tasks.TaskResult{})
	err = backend.SetStateFailure(sig, "error")
	state, err = backend.GetState(sig.UUID)
	_ = backend.IsAMQP()
	err = backend.PurgeState(sig.UUID)
	err = backend.PurgeGroupMeta("group")
	asyncResult = result.NewAsyncResult(sig, backend)
	chainResult = result.NewChainAsyncResult([]*tasks.Signature{sig}, backend)
	chordResult = result.NewChordAsyncResult([]*tasks.Signature{sig}, sig, backend)
	_, _ = done, states
	var broker brokers.Broker = server.GetBroker()
	var _ *config.Config = broker.GetConfig()
	broker.SetRegisteredTaskNames([]string{"add"})
	_ = broker.IsTaskRegistered("add")
	var processor brokers.TaskProcessor = worker
	var retryConsuming bool
	retryConsuming, err = broker.StartConsuming("machinery_worker", 1, processor)
	_ = retryConsuming
	broker.StopConsuming()
	err = broker.Publish(context.Background(), sig)
	var signatures []*tasks.Signature
	signatures, err = broker.GetPendingTasks("machinery_tasks")
	signatures, err = broker.GetDelayedTasks()
	_ = signatures
	broker.AdjustRoutingKey(sig)

	_ = tasks.ValidateTask(func() error { return nil })
	_, _ = tasks.ReflectValue("int64", int64(1))
	_, _ = tasks.ReflectTaskResults([]*tasks.TaskResult{{Type: "int64", Value: int64(1)}})
	var retry tasks.Retriable = tasks.NewErrRetryTaskLater("later", time.Second)
	_ = retry.RetryIn()
	var _ tasks.ErrRetryTaskLater
	var _ error = tasks.ErrUnsupportedType{}
	_ = tasks.ErrTaskPanicked
	_ = tasks.SignatureFromContext(context.Background())
	_ = result.ErrBackendNotConfigured
	_ = result.ErrTimeoutReached
	_ = values
	return err
}

var _ = machineryProgram
