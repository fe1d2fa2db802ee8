package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// bullmqDir is the directory of flow.js and its package.json, relative to
// the bench module (the program runs with `go run .` from bench/).
const bullmqDir = "bullmq"

// bullmqConcurrency is the concurrency of the worker flow.js starts, as
// for machinist's flow runs.
const bullmqConcurrency = 10

var (
	bullmqInstallOnce sync.Once
	bullmqInstallErr  error
)

// bullmqFlow runs bench/bullmq/flow.js against the Redis at addr for
// shape ("children1000" or "tree3"): one warm-up run and timed runs,
// each from FlowProducer.add to the root's result, with a worker of
// concurrency 10 in the node process. It returns the timed runs'
// durations, how many runs there were in all (warm-up included) and the
// nodes per run.
func bullmqFlow(ctx context.Context, addr, shape string, timed int) (times []time.Duration, runs, nodesPerRun int, err error) {
	if timed < 1 {
		return nil, 0, 0, fmt.Errorf("bullmq flow %s: %d timed runs, want at least 1", shape, timed)
	}
	script := filepath.Join(bullmqDir, "flow.js")
	if _, err := os.Stat(script); err != nil {
		return nil, 0, 0, fmt.Errorf("bullmq flow: %w (run the benchmark from bench/)", err)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		return nil, 0, 0, fmt.Errorf("bullmq flow: node (Node.js) is not in PATH: install it (Debian: apt-get install nodejs npm): %w", err)
	}
	if err := bullmqInstall(ctx); err != nil {
		return nil, 0, 0, err
	}

	var stdout bytes.Buffer
	stderr := &bullmqTailBuffer{max: 4 << 10}
	cmd := exec.CommandContext(ctx, node, "flow.js",
		"--redis", addr,
		"--shape", shape,
		"--timed", strconv.Itoa(timed),
		"--concurrency", strconv.Itoa(bullmqConcurrency))
	cmd.Dir = bullmqDir
	setChildAttrs(cmd) // it dies with this program
	cmd.Stdout = &stdout
	cmd.Stderr = stderr
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (%w)", ctx.Err(), err)
		}
		return nil, 0, 0, fmt.Errorf("bullmq flow %s: node flow.js: %w%s", shape, err, stderr.describe())
	}

	done := false
	for line := range strings.Lines(stdout.String()) {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "{") {
			continue // not ours: flow.js writes only JSON objects
		}
		var rec struct {
			Shape       string   `json:"shape"`
			Nodes       int      `json:"nodes"`
			MS          *float64 `json:"ms"`
			Done        bool     `json:"done"`
			Runs        int      `json:"runs"`
			NodesPerRun int      `json:"nodes_per_run"`
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			return nil, 0, 0, fmt.Errorf("bullmq flow %s: flow.js printed %q: %w", shape, line, err)
		}
		switch {
		case rec.Done:
			done, runs, nodesPerRun = true, rec.Runs, rec.NodesPerRun
		case rec.MS != nil:
			if rec.Shape != shape {
				return nil, 0, 0, fmt.Errorf("bullmq flow %s: flow.js reported a run of shape %q", shape, rec.Shape)
			}
			if *rec.MS < 0 {
				return nil, 0, 0, fmt.Errorf("bullmq flow %s: flow.js reported %v ms", shape, *rec.MS)
			}
			times = append(times, time.Duration(*rec.MS*float64(time.Millisecond)))
		default:
			return nil, 0, 0, fmt.Errorf("bullmq flow %s: unexpected line from flow.js: %s", shape, line)
		}
	}
	switch {
	case !done:
		return nil, 0, 0, fmt.Errorf("bullmq flow %s: flow.js exited without its summary line%s", shape, stderr.describe())
	case len(times) != timed:
		return nil, 0, 0, fmt.Errorf("bullmq flow %s: flow.js reported %d timed runs, want %d", shape, len(times), timed)
	case runs != timed+1:
		return nil, 0, 0, fmt.Errorf("bullmq flow %s: flow.js made %d runs, want %d (warm-up included)", shape, runs, timed+1)
	case nodesPerRun <= 0:
		return nil, 0, 0, fmt.Errorf("bullmq flow %s: flow.js reported %d nodes per run", shape, nodesPerRun)
	}
	return times, runs, nodesPerRun, nil
}

// bullmqInstall runs `npm ci` in bullmqDir, once per process, when
// bullmq is not installed there.
func bullmqInstall(ctx context.Context) error {
	bullmqInstallOnce.Do(func() {
		if bullmqVersion() != "" {
			return
		}
		npm, err := exec.LookPath("npm")
		if err != nil {
			bullmqInstallErr = fmt.Errorf("bullmq is not installed in %s and npm is not in PATH: install it (Debian: apt-get install npm): %w", bullmqDir, err)
			return
		}
		cmd := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund")
		cmd.Dir = bullmqDir
		out, err := cmd.CombinedOutput()
		if err == nil && bullmqVersion() == "" {
			err = errors.New("node_modules/bullmq/package.json still missing afterwards")
		}
		if err != nil {
			bullmqInstallErr = fmt.Errorf("npm ci in %s: %w\n%s", bullmqDir, err, bullmqTail(out, 4<<10))
		}
	})
	return bullmqInstallErr
}

// bullmqVersion returns the version of bullmq installed in
// bullmq/node_modules, or "" if it is not installed.
func bullmqVersion() string {
	b, err := os.ReadFile(filepath.Join(bullmqDir, "node_modules", "bullmq", "package.json"))
	if err != nil {
		return ""
	}
	var pkg struct {
		Version string `json:"version"`
	}
	if json.Unmarshal(b, &pkg) != nil {
		return ""
	}
	return pkg.Version
}

// bullmqTailBuffer is an io.Writer keeping the last max bytes written to it.
type bullmqTailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *bullmqTailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

// describe returns the kept tail as "; stderr: …", or "" if empty.
func (t *bullmqTailBuffer) describe() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := strings.TrimSpace(string(t.buf))
	if s == "" {
		return ""
	}
	return "; stderr: " + s
}

// bullmqTail returns the last max bytes of b, trimmed, marked if cut.
func bullmqTail(b []byte, max int) string {
	s := strings.TrimSpace(string(b))
	if len(s) > max {
		s = "…" + s[len(s)-max:]
	}
	return s
}
