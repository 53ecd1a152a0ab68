// go-redis's ClusterClient against a Shale cluster, the second cluster client library of the
// cluster tests (redis-py's is the first). It learns the slots from CLUSTER SLOTS, follows
// MOVED and retries TRYAGAIN as it does against Redis Cluster.
//
// Usage, with the address of any node:
//
//	cluster_clients load   ADDR PREFIX COUNT  write COUNT keys of six types (the layout of cluster_clients.py)
//	cluster_clients verify ADDR PREFIX COUNT  read them back, exactly
//	cluster_clients rewrite ADDR TAG STOPFILE rewrite 500 keys of hash tag TAG until STOPFILE exists, then check the last acknowledged values
//	cluster_clients acked  ADDR TAG STOPFILE  write new keys of TAG, each batch acknowledged by WAIT 1 on its master, until STOPFILE exists, then check every acknowledged one
//
// rewrite and acked print one JSON line of counts. Any failure exits non-zero.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

const batch = 1000

var ctx = context.Background()

func main() {
	if len(os.Args) != 5 {
		fail("usage: cluster_clients load|verify|rewrite|acked ADDR ARG ARG")
	}
	client := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs:        []string{os.Args[2]},
		MaxRedirects: 8,
		ReadTimeout:  10 * time.Second,
	})
	defer client.Close()
	switch os.Args[1] {
	case "load":
		load(client, os.Args[3], count(os.Args[4]))
	case "verify":
		verify(client, os.Args[3], count(os.Args[4]))
	case "rewrite":
		rewrite(client, os.Args[3], os.Args[4])
	case "acked":
		acked(client, os.Args[3], os.Args[4])
	default:
		fail("unknown mode " + os.Args[1])
	}
}

func count(text string) int {
	n, err := strconv.Atoi(text)
	if err != nil {
		fail("count: " + err.Error())
	}
	return n
}

func fail(message string) {
	fmt.Fprintln(os.Stderr, message)
	os.Exit(1)
}

// The i-th key's type is i % 6; every 60th key, a string, has a TTL of an hour.
func load(client *redis.ClusterClient, prefix string, n int) {
	for start := 0; start < n; start += batch {
		pipe := client.Pipeline()
		for i := start; i < min(start+batch, n); i++ {
			key := fmt.Sprintf("%s:%d", prefix, i)
			switch i % 6 {
			case 0:
				ttl := time.Duration(0)
				if i%60 == 0 {
					ttl = time.Hour
				}
				pipe.Set(ctx, key, fmt.Sprintf("v%d", i), ttl)
			case 1:
				pipe.HSet(ctx, key, "f1", fmt.Sprintf("a%d", i), "f2", fmt.Sprintf("b%d", i), "f3", i)
			case 2:
				pipe.RPush(ctx, key, fmt.Sprintf("x%d", i), fmt.Sprintf("y%d", i), fmt.Sprintf("z%d", i))
			case 3:
				pipe.SAdd(ctx, key, fmt.Sprintf("s%d", i), fmt.Sprintf("t%d", i), fmt.Sprintf("u%d", i))
			case 4:
				pipe.ZAdd(ctx, key, redis.Z{Score: float64(i), Member: fmt.Sprintf("m%d", i)},
					redis.Z{Score: float64(i + 1), Member: fmt.Sprintf("n%d", i)})
			case 5:
				pipe.XAdd(ctx, &redis.XAddArgs{Stream: key, ID: fmt.Sprintf("%d-1", i+1),
					Values: []string{"f", fmt.Sprintf("v%d", i)}})
			}
		}
		if _, err := pipe.Exec(ctx); err != nil {
			fail("load: " + err.Error())
		}
	}
}

func verify(client *redis.ClusterClient, prefix string, n int) {
	for start := 0; start < n; start += batch {
		pipe := client.Pipeline()
		cmds := make([]redis.Cmder, 0, batch)
		ttls := map[int]*redis.DurationCmd{}
		for i := start; i < min(start+batch, n); i++ {
			key := fmt.Sprintf("%s:%d", prefix, i)
			switch i % 6 {
			case 0:
				cmds = append(cmds, pipe.Get(ctx, key))
				if i%60 == 0 {
					ttls[i] = pipe.TTL(ctx, key)
				}
			case 1:
				cmds = append(cmds, pipe.HGetAll(ctx, key))
			case 2:
				cmds = append(cmds, pipe.LRange(ctx, key, 0, -1))
			case 3:
				cmds = append(cmds, pipe.SMembers(ctx, key))
			case 4:
				cmds = append(cmds, pipe.ZRangeWithScores(ctx, key, 0, -1))
			case 5:
				cmds = append(cmds, pipe.XRange(ctx, key, "-", "+"))
			}
		}
		if _, err := pipe.Exec(ctx); err != nil {
			fail("verify: " + err.Error())
		}
		for k, cmd := range cmds {
			i := start + k
			want := expected(i)
			if got := shown(cmd); got != want {
				fail(fmt.Sprintf("%s:%d is %s, not %s", prefix, i, got, want))
			}
		}
		for i, ttl := range ttls {
			if d := ttl.Val(); d <= 0 || d > time.Hour {
				fail(fmt.Sprintf("%s:%d has TTL %v", prefix, i, d))
			}
		}
	}
}

// expected is the i-th key's value in shown's form.
func expected(i int) string {
	switch i % 6 {
	case 0:
		return fmt.Sprintf("v%d", i)
	case 1:
		return fmt.Sprintf("map[f1:a%d f2:b%d f3:%d]", i, i, i)
	case 2:
		return fmt.Sprintf("[x%d y%d z%d]", i, i, i)
	case 3:
		return fmt.Sprintf("[s%d t%d u%d]", i, i, i)
	case 4:
		return fmt.Sprintf("[{%d m%d} {%d n%d}]", i, i, i+1, i)
	default:
		return fmt.Sprintf("[{%d-1 map[f:v%d]}]", i+1, i)
	}
}

// shown is a reply in one comparable form; set members are sorted.
func shown(cmd redis.Cmder) string {
	if err := cmd.Err(); err != nil {
		return "error " + err.Error()
	}
	switch c := cmd.(type) {
	case *redis.StringCmd:
		return c.Val()
	case *redis.MapStringStringCmd:
		return fmt.Sprint(c.Val())
	case *redis.StringSliceCmd:
		values := c.Val()
		if c.Name() == "smembers" {
			sort.Strings(values)
		}
		return fmt.Sprint(values)
	case *redis.ZSliceCmd:
		parts := []string{}
		for _, z := range c.Val() {
			parts = append(parts, fmt.Sprintf("{%v %v}", z.Score, z.Member))
		}
		return "[" + strings.Join(parts, " ") + "]"
	case *redis.XMessageSliceCmd:
		parts := []string{}
		for _, m := range c.Val() {
			parts = append(parts, fmt.Sprintf("{%s %v}", m.ID, m.Values))
		}
		return "[" + strings.Join(parts, " ") + "]"
	}
	return "unexpected reply " + cmd.String()
}

func stopped(stopfile string) bool {
	_, err := os.Stat(stopfile)
	return err == nil
}

// rewrite sets 500 keys of one hash tag round after round, retrying a failed write with the
// same value until it is acknowledged, so each key's last acknowledged value is the one it
// must hold at the end, wherever its slot went meanwhile.
func rewrite(client *redis.ClusterClient, tag, stopfile string) {
	const keys = 500
	last := make([]int, keys)
	writes, retries := 0, 0
	for round := 1; !stopped(stopfile); round++ {
		for k := 0; k < keys; k++ {
			key := fmt.Sprintf("w:{%s}:%d", tag, k)
			for client.Set(ctx, key, round, 0).Err() != nil {
				retries++
				time.Sleep(5 * time.Millisecond)
			}
			last[k] = round
			writes++
		}
	}
	for k := 0; k < keys; k++ {
		key := fmt.Sprintf("w:{%s}:%d", tag, k)
		got, err := client.Get(ctx, key).Int()
		if err != nil || got != last[k] {
			fail(fmt.Sprintf("%s holds %d (%v), its last acknowledged write was %d", key, got, err, last[k]))
		}
	}
	report(map[string]int{"keys": keys, "writes": writes, "retries": retries})
}

// acked writes batches of 50 new keys to the master of TAG's slot, each followed by WAIT 1;
// a batch counts as acknowledged when WAIT says a replica has it. Errors (the master dies,
// the topology changes) are retried with a fresh view of the slots.
func acked(client *redis.ClusterClient, tag, stopfile string) {
	const size = 50
	acknowledged, failures := 0, 0
	for round := 0; !stopped(stopfile); round++ {
		master, err := client.MasterForKey(ctx, "{"+tag+"}")
		if err == nil {
			pipe := master.Pipeline()
			for k := 0; k < size; k++ {
				pipe.Set(ctx, fmt.Sprintf("a:{%s}:%d:%d", tag, round, k), round, 0)
			}
			wait := pipe.Do(ctx, "WAIT", 1, 1000)
			_, err = pipe.Exec(ctx)
			if replicas, _ := wait.Int64(); err == nil && replicas >= 1 {
				acknowledged = round + 1
				continue
			}
		}
		// The round is written again, with a fresh view of the slots, until acknowledged.
		failures++
		client.ReloadState(ctx)
		time.Sleep(50 * time.Millisecond)
		round--
	}
	for round := 0; round < acknowledged; round++ {
		pipe := client.Pipeline()
		gets := make([]*redis.StringCmd, size)
		for k := 0; k < size; k++ {
			gets[k] = pipe.Get(ctx, fmt.Sprintf("a:{%s}:%d:%d", tag, round, k))
		}
		_, _ = pipe.Exec(ctx)
		for k, get := range gets {
			if got, err := get.Int(); err != nil || got != round {
				fail(fmt.Sprintf("acknowledged a:{%s}:%d:%d is lost: %d (%v)", tag, round, k, got, err))
			}
		}
	}
	report(map[string]int{"acknowledged_batches": acknowledged, "keys": acknowledged * size, "failures": failures})
}

func report(counts map[string]int) {
	line, err := json.Marshal(counts)
	if err != nil {
		fail(err.Error())
	}
	fmt.Println(string(line))
}
