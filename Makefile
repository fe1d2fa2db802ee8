# machinist: `make test` is what CI runs (.ci/run); it installs redis-server
# when it is missing (as root) and the tests start their own servers.

GO       ?= go
PKGS     ?= ./...
TESTFLAGS ?=

.PHONY: help test vet fmt lint bench bench-go quickstart fuzz chaos machinery-compat

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

test: ## go vet, every test with -race, the migration mode beside real machinery, then machinery's own tests (installs redis-server if missing)
	@bash scripts/ensure-redis.sh
	$(GO) vet $(PKGS)
	$(GO) test -race -count=1 -timeout 15m $(TESTFLAGS) $(PKGS)
	cd example/telemetry && $(GO) vet ./... && $(GO) test -race -count=1 ./...
	cd integration-tests/machinery-migration && $(GO) vet ./... && $(GO) test -race -count=1 ./...
	@bash scripts/machinery-compat.sh

machinery-compat: ## machinery v1's own integration tests and example/redis, import prefix rewritten, on this checkout
	@bash scripts/ensure-redis.sh
	@bash scripts/machinery-compat.sh

vet: ## go vet
	$(GO) vet $(PKGS)

fmt: ## gofmt every file
	gofmt -w $$(git ls-files '*.go')

lint: ## gofmt check and go vet
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (gofmt -l $$(git ls-files '*.go'); exit 1)
	$(GO) vet $(PKGS)

bench: ## the comparison with asynq, machinery and BullMQ (bench/, ~18 min; results in bench/results/)
	cd bench && $(GO) run . -reps 3 -json results/latest.jsonl -md results/latest.md

bench-go: ## go test benchmarks of the hot paths (compare runs with benchstat)
	$(GO) test -run '^$$' -bench . -benchmem ./v1/... ./internal/... ./integration-tests/

chaos: ## the chaos suite as a soak: each fault repeated for SOAK (default 10m)
	@bash scripts/ensure-redis.sh
	$(GO) test -race -count=1 -timeout 0 -v ./integration-tests/chaos/ -args -chaos.soak=$(or $(SOAK),10m)

fuzz: ## run each fuzz target for 30s
	$(GO) test -run '^$$' -fuzz FuzzReflectValue -fuzztime 30s ./v1/tasks
	$(GO) test -run '^$$' -fuzz FuzzDecodeSignature -fuzztime 30s ./v1/tasks
	$(GO) test -run '^$$' -fuzz FuzzDequeueReply -fuzztime 30s ./internal/rdb
	$(GO) test -run '^$$' -fuzz FuzzIDReplies -fuzztime 30s ./internal/rdb
	$(GO) test -run '^$$' -fuzz FuzzScalarReplies -fuzztime 30s ./internal/rdb
	$(GO) test -run '^$$' -fuzz FuzzFieldReplies -fuzztime 30s ./internal/rdb

quickstart: ## run the quick start on the in-process broker
	$(GO) run ./example/quickstart
