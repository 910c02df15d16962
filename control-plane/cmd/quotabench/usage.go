package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// userHZ is the unit of /proc/<pid>/stat's CPU times: USER_HZ, fixed at 100 for user space on
// Linux whatever the kernel's own tick.
const userHZ = 100

// cpuTime is a process's CPU time so far, user and system (/proc/<pid>/stat fields 14 and 15).
func cpuTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// pid (comm) state …: comm may hold spaces, so fields count from after the last ')'.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no ')'", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields after comm", pid, len(f))
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: utime %q stime %q", pid, f[11], f[12])
	}
	return time.Duration(utime+stime) * time.Second / userHZ, nil
}

// cpuTimes sums cpuTime over pids.
func cpuTimes(pids []int) (time.Duration, error) {
	var sum time.Duration
	for _, pid := range pids {
		t, err := cpuTime(pid)
		if err != nil {
			return 0, err
		}
		sum += t
	}
	return sum, nil
}

// commands is what the store's data nodes have processed so far (INFO's
// total_commands_processed), the primaries' apart from the replicas' (which replay the writes).
type commands struct{ primaries, replicas int64 }

func (c commands) minus(o commands) commands {
	return commands{c.primaries - o.primaries, c.replicas - o.replicas}
}

// commandsProcessed asks every data node; the INFO it sends counts as one command of its own.
func commandsProcessed(ctx context.Context, nodes []*redis.Client) (commands, error) {
	var c commands
	for _, n := range nodes {
		info, err := n.Info(ctx, "stats", "replication").Result()
		if err != nil {
			return c, fmt.Errorf("INFO from %s: %w", n.Options().Addr, err)
		}
		total, err := infoField(info, "total_commands_processed")
		if err != nil {
			return c, fmt.Errorf("%s: %w", n.Options().Addr, err)
		}
		if strings.Contains(info, "role:slave") {
			c.replicas += total
		} else {
			c.primaries += total
		}
	}
	return c, nil
}

func infoField(info, name string) (int64, error) {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, fmt.Errorf("INFO has no %s", name)
}

// usage is one reading of every cost the benchmark divides by the reports answered.
type usage struct {
	quotaCPU, redisCPU, benchCPU time.Duration
	commands                     commands
}

func (u usage) minus(o usage) usage {
	return usage{u.quotaCPU - o.quotaCPU, u.redisCPU - o.redisCPU, u.benchCPU - o.benchCPU, u.commands.minus(o.commands)}
}

// meter reads the quota service's, the store's and the generator's own CPU time and the data
// nodes' command counts.
type meter struct {
	quotaPID  int
	redisPIDs []int
	nodes     []*redis.Client
}

func (m meter) read(ctx context.Context) (usage, error) {
	var u usage
	var err error
	if u.quotaCPU, err = cpuTime(m.quotaPID); err != nil {
		return u, err
	}
	if u.redisCPU, err = cpuTimes(m.redisPIDs); err != nil {
		return u, err
	}
	if u.benchCPU, err = cpuTime(os.Getpid()); err != nil {
		return u, err
	}
	u.commands, err = commandsProcessed(ctx, m.nodes)
	return u, err
}
