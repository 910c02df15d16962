package e2ekafkacluster

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// javaGroup is a consumer group of two Java consumers (clients/ClusterConsumer.java) reading a
// topic through the gateway, each writing what it was given into a file of its own. Each runs
// as a processProducer does (started once it says so).
type javaGroup struct {
	members []*processProducer
	files   []string
}

func startJavaGroup(t *testing.T, topic, group string) *javaGroup {
	t.Helper()
	g := &javaGroup{}
	for i := range 2 {
		file := filepath.Join(t.TempDir(), "read")
		g.files = append(g.files, file)
		g.members = append(g.members, startProducer(t, "", javaCommand(t, "ClusterConsumer", bootstraps(), topic, group,
			"cluster-limited-java-consumer-"+strconv.Itoa(i), file)))
	}
	return g
}

// read is what each member has been given so far, per partition, in the order given.
func (g *javaGroup) read(t *testing.T) []map[int32][]consumed {
	t.Helper()
	var out []map[int32][]consumed
	for _, file := range g.files {
		m := map[int32][]consumed{}
		f, err := os.Open(file)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) != 3 {
				continue // a line being written
			}
			p, _ := strconv.Atoi(fields[0])
			off, _ := strconv.ParseInt(fields[1], 10, 64)
			m[int32(p)] = append(m[int32(p)], consumed{off, fields[2]})
		}
		f.Close()
		out = append(out, m)
	}
	return out
}

var rebalancesLine = regexp.MustCompile(`rebalances=(\d+)`)

// check waits until the group has read every stored record, stops its members and checks each
// member's order (checkOrder).
func (g *javaGroup) check(t *testing.T, s stored) {
	t.Helper()
	waitRead(t, "the Java consumer group", func() map[string]bool {
		out := map[string]bool{}
		for _, m := range g.read(t) {
			for _, rs := range m {
				for _, r := range rs {
					out[r.value] = true
				}
			}
		}
		return out
	}, s)
	for _, file := range g.files {
		if err := os.WriteFile(file+".stop", nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	rereads, rebalances := 0, 0
	for i, m := range g.members {
		if err := m.cmd.Wait(); err != nil {
			t.Fatalf("ClusterConsumer %d: %v\n%s", i, err, tail(m.stderr.String(), 3000))
		}
		n := 0
		if r := rebalancesLine.FindStringSubmatch(m.stdout.String()); r != nil {
			n, _ = strconv.Atoi(r[1])
		}
		rebalances += n
		rereads += checkOrder(t, "Java consumer "+strconv.Itoa(i), g.read(t)[i], n, true)
	}
	t.Logf("the Java consumer group (2 members) read every stored record; %d read again, after %d rebalances", rereads, rebalances)
}

// consumed is one record a consumer was given.
type consumed struct {
	offset int64
	value  string
}

// waitRead waits, at most 60 s, until a consumer has read every stored record.
func waitRead(t *testing.T, who string, distinct func() map[string]bool, s stored) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		read := distinct()
		missing := 0
		for v := range s.count {
			if !read[v] {
				missing++
			}
		}
		if missing == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("%s has not read %d of %d stored records", who, missing, len(s.count))
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// checkOrder checks what one consumer was given of each partition, in the order given: each
// record is the one after the last, or an earlier one read again (resumed from the last
// committed offset), counted and allowed only after a rebalance. In a group of several members
// (movedAway) a member may be given a partition another read the start of, or have one handed
// to another member and back after a rebalance: it resumes further on, and the group's records
// together are checked to cover every stored one (waitRead).
func checkOrder(t *testing.T, who string, read map[int32][]consumed, rebalances int, movedAway bool) (rereads int) {
	t.Helper()
	for p, rs := range read {
		prev := int64(-1)
		for _, r := range rs {
			resumedElsewhere := movedAway && (prev < 0 || rebalances > 0)
			if r.offset > prev+1 && !resumedElsewhere {
				t.Errorf("%s, partition %d: offset %d delivered after %d: records skipped, out of order", who, p, r.offset, prev)
			}
			if r.offset <= prev {
				rereads++
			}
			prev = r.offset
		}
	}
	if rereads > 0 && rebalances == 0 {
		t.Errorf("%s: %d records read again without a rebalance", who, rereads)
	}
	return rereads
}
