package main

import (
	"os"
	"strconv"
	"strings"
)

// cpuSnapshot is what /proc says about CPU time, in clock ticks: the whole
// machine's, this process's and redis-server's. Other processes on the
// machine (a test suite, a build) disturb the figures; comparing the three
// tells how much CPU they took during a run.
type cpuSnapshot struct {
	ok          bool
	busy, total int64
	self, redis int64
}

func readCPUSnapshot(redisPID int) cpuSnapshot {
	var s cpuSnapshot
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return s
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 8 || f[0] != "cpu" {
		return s
	}
	var v [10]int64
	for i := 1; i < len(f) && i <= 10; i++ {
		v[i-1], _ = strconv.ParseInt(f[i], 10, 64)
	}
	// user nice system idle iowait irq softirq steal (guest is in user)
	s.busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7]
	s.total = s.busy + v[3] + v[4]
	var ok1, ok2 bool
	s.self, ok1 = procTicks("self", true)
	s.redis, ok2 = procTicks(strconv.Itoa(redisPID), false)
	s.ok = ok1 && ok2
	return s
}

// procTicks returns utime+stime of /proc/<pid>/stat, plus cutime+cstime
// (the children it has waited for: bullmq's Node.js runs, redis-benchmark)
// with children.
func procTicks(pid string, children bool) (int64, bool) {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0, false
	}
	// The command name, in parentheses, may hold spaces: count from the
	// last ')'.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	// After ')': state is field 3, utime 14, stime 15 (1-based, whole line).
	if len(f) < 13 {
		return 0, false
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	if children && len(f) >= 15 {
		cu, _ := strconv.ParseInt(f[13], 10, 64)
		cs, _ := strconv.ParseInt(f[14], 10, 64)
		u, st = u+cu, st+cs
	}
	return u + st, true
}

// otherCPU returns the share of the machine's CPU time (all CPUs, in %)
// that went to processes other than this one and redis-server between a
// and b; ok is false where /proc is not available.
func otherCPU(a, b cpuSnapshot) (pct float64, ok bool) {
	if !a.ok || !b.ok || b.total <= a.total {
		return 0, false
	}
	other := (b.busy - a.busy) - (b.self - a.self) - (b.redis - a.redis)
	if other < 0 {
		other = 0
	}
	return float64(other) / float64(b.total-a.total) * 100, true
}
