package core_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/internal/redistest"
	"github.com/ratekit/ratekit/internal/testkit"
	"github.com/ratekit/ratekit/redisstore"
)

// The exactness test runs this test binary again as child processes; these
// variables carry a child's assignment.
const (
	envChild   = "RATEKIT_EXACT_CHILD"
	envAddrs   = "RATEKIT_EXACT_ADDRS"
	envCluster = "RATEKIT_EXACT_CLUSTER"
	envKey     = "RATEKIT_EXACT_KEY"
	envAlg     = "RATEKIT_EXACT_ALG"
	envStart   = "RATEKIT_EXACT_START"
	envBatched = "RATEKIT_EXACT_BATCHED"
)

const (
	exactProcs      = 4
	exactGoroutines = 64
	exactCalls      = 12 // per goroutine: 4 × 64 × 12 = 3072 attempts on a limit of 1000
	exactLimit      = 1000
)

// TestExactAcrossProcesses sends 4 processes × 64 goroutines at one key
// limited to 1000 per minute, for every algorithm, on a standalone Redis and
// on a 3-master Cluster, and counts what was admitted.
func TestExactAcrossProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Redis servers and child processes")
	}
	srv := redistest.StartServer(t)
	cl := redistest.StartCluster(t, 3)
	for _, topo := range []struct {
		name    string
		addrs   []string
		cluster bool
	}{
		{"standalone", []string{srv.Addr()}, false},
		{"cluster", cl.Addrs(), true},
	} {
		for _, run := range exactRuns() {
			alg, batchedRun := run.alg, run.batched
			name := topo.name + "/" + alg.String()
			if batchedRun {
				name += "/batched"
			}
			t.Run(name, func(t *testing.T) {
				awayFromMinuteEdge(5 * time.Second)
				key, _ := testkit.KeyOf("exact:", alg.String(), fmt.Sprintf("ip:%d", time.Now().UnixNano()))
				startAt := time.Now().Add(300 * time.Millisecond)
				outs := make([]bytes.Buffer, exactProcs)
				cmds := make([]*exec.Cmd, exactProcs)
				for i := range cmds {
					cmd := exec.Command(os.Args[0], "-test.run=^TestExactChild$", "-test.count=1")
					cmd.Env = append(os.Environ(),
						envChild+"=1",
						envAddrs+"="+strings.Join(topo.addrs, ","),
						envCluster+"="+strconv.FormatBool(topo.cluster),
						envKey+"="+key,
						envAlg+"="+alg.String(),
						envStart+"="+strconv.FormatInt(startAt.UnixNano(), 10),
						envBatched+"="+strconv.FormatBool(batchedRun),
					)
					cmd.Stdout, cmd.Stderr = &outs[i], &outs[i]
					if err := cmd.Start(); err != nil {
						t.Fatal(err)
					}
					cmds[i] = cmd
				}
				total := 0
				for i, cmd := range cmds {
					if err := cmd.Wait(); err != nil {
						t.Fatalf("child %d: %v\n%s", i, err, outs[i].String())
					}
					n, ok := childCount(outs[i].String())
					if !ok {
						t.Fatalf("child %d printed no count:\n%s", i, outs[i].String())
					}
					total += n
				}
				elapsed := time.Since(startAt)
				switch alg {
				case core.GCRA:
					// the burst of 1000, plus what refilled while it lasted
					refill := int(elapsed/(time.Minute/exactLimit)) + 1
					if total < exactLimit || total > exactLimit+refill {
						t.Fatalf("admitted %d, want %d plus at most %d refilled in %v", total, exactLimit, refill, elapsed)
					}
				default:
					if total != exactLimit {
						t.Fatalf("admitted %d of %d attempts, want exactly %d", total, exactProcs*exactGoroutines*exactCalls, exactLimit)
					}
				}
				t.Logf("%s: admitted %d in %v", alg, total, elapsed.Round(time.Millisecond))
			})
		}
	}
}

type exactRun struct {
	alg     core.Algorithm
	batched bool
}

// exactRuns is every algorithm, plain and through pipelined batching.
func exactRuns() []exactRun {
	var runs []exactRun
	for _, b := range []bool{false, true} {
		for _, alg := range testkit.Algorithms {
			runs = append(runs, exactRun{alg, b})
		}
	}
	return runs
}

// awayFromMinuteEdge waits for the next minute if fewer than margin remain
// in this one, so windows of a minute do not turn over during a run.
func awayFromMinuteEdge(margin time.Duration) {
	now := time.Now()
	if next := now.Truncate(time.Minute).Add(time.Minute); next.Sub(now) < margin {
		time.Sleep(next.Sub(now) + 50*time.Millisecond)
	}
}

func childCount(out string) (int, bool) {
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(line, "admitted="); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			return n, err == nil
		}
	}
	return 0, false
}

// TestExactChild is the child side of TestExactAcrossProcesses; it does
// nothing unless started by it.
func TestExactChild(t *testing.T) {
	if os.Getenv(envChild) != "1" {
		t.Skip("child process of TestExactAcrossProcesses")
	}
	alg, err := core.ParseAlgorithm(os.Getenv(envAlg))
	if err != nil {
		t.Fatal(err)
	}
	startNS, _ := strconv.ParseInt(os.Getenv(envStart), 10, 64)
	addrs := strings.Split(os.Getenv(envAddrs), ",")
	var client redis.UniversalClient
	if os.Getenv(envCluster) == "true" {
		client = redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, PoolSize: exactGoroutines})
	} else {
		client = redis.NewClient(&redis.Options{Addr: addrs[0], PoolSize: exactGoroutines})
	}
	defer client.Close()
	opts := []redisstore.Option{redisstore.WithoutBatching()}
	if os.Getenv(envBatched) == "true" {
		opts = []redisstore.Option{redisstore.WithBatching(redisstore.Batching{MaxBatch: 0, Parallel: 0, MaxWait: 0})}
	}
	store := testkit.MustRedis(client, opts...)
	defer store.Close()
	limit := core.PerMinute(exactLimit).WithAlgorithm(alg)
	key := os.Getenv(envKey)
	ctx := context.Background()
	// warm the pool and the script cache before the shared start
	if err := client.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Until(time.Unix(0, startNS)))

	var admitted atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, exactGoroutines)
	for range exactGoroutines {
		wg.Go(func() {
			for range exactCalls {
				r, err := testkit.AllowOne(store, ctx, key, limit, 1)
				if err != nil {
					errs <- err
					return
				}
				if r.Allowed {
					admitted.Add(1)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	fmt.Printf("admitted=%d\n", admitted.Load())
}
