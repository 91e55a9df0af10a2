package inflight_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/inflight"
	"github.com/ratekit/ratekit/internal/redistest"
)

// The cross-process test runs this test binary again as child processes;
// these variables carry a child's assignment.
const (
	envChild = "RATEKIT_INFLIGHT_CHILD"
	envAddr  = "RATEKIT_INFLIGHT_REDIS"
	envRule  = "RATEKIT_INFLIGHT_RULE"
)

const (
	procs        = 4
	procCap      = 5
	procLease    = time.Second
	clients      = 12  // goroutines per child
	maxPerClient = 300 // requests per goroutine at most
	childLimit   = 2 * time.Minute
)

// TestCapAcrossProcesses runs four processes, each serving the middleware
// over one real redis-server with a global cap of 5, and counts the
// handlers in flight apart from the limiter (INCR and DECR on a key of
// their own): the count never exceeds the cap, though some handlers
// outlive two lease times and keep their slots only by renewal. Then one
// process is killed with SIGKILL while it holds every slot, and the slots
// come back to the others within the lease time, not before most of it.
func TestCapAcrossProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts redis-server and child processes")
	}
	srv := redistest.StartServer(t)
	rdb := srv.Client(t)
	rule := fmt.Sprintf("procs-%d", time.Now().UnixNano())
	addrs := make([]string, procs)
	cmds := make([]*exec.Cmd, procs)
	for i := range procs {
		cmds[i], addrs[i] = startChild(t, srv.Addr(), rule)
	}

	maxSeen, codes := hammer(t, rdb, addrs)
	t.Logf("answers %v, most handlers in flight %d", codes, maxSeen)
	if maxSeen > procCap {
		t.Fatalf("%d handlers in flight at once, cap %d", maxSeen, procCap)
	}
	if maxSeen < procCap || codes[http.StatusTooManyRequests] == 0 {
		t.Fatalf("the cap was never reached (most in flight %d, answers %v): the test proves nothing", maxSeen, codes)
	}
	if len(codes) != 2 {
		t.Fatalf("answers %v: want only 200 and 429", codes)
	}

	key := "ratekit:" + rule + ":{all}"
	waitFor(t, 10*time.Second, "every slot free", func() bool { return rdb.ZCard(context.Background(), key).Val() == 0 })
	killHolder(t, rdb, cmds[0], addrs)
}

// killHolder makes the process of cmd hold every slot but one, which
// another process holds and renews all along, kills it with SIGKILL, and
// checks that its slots come back to the other processes within the lease
// time: the key stays alive, so only dropping expired holders frees them.
func killHolder(t *testing.T, rdb *redis.Client, cmd *exec.Cmd, addrs []string) {
	held := func(n int) func() bool {
		return func() bool { return rdb.Get(context.Background(), "inflight-test:held").Val() == strconv.Itoa(n) }
	}
	go get(addrs[1], 8*procLease, "held") // the survivor's slot
	waitFor(t, 10*time.Second, "the survivor's slot held", held(1))
	for range procCap - 1 {
		go get(addrs[0], 60*time.Second, "held") // ends with the process
	}
	waitFor(t, 10*time.Second, "every slot held", held(procCap))
	if code, _, err := get(addrs[2], 0, "probe"); err != nil || code != http.StatusTooManyRequests {
		t.Fatalf("while every slot is held: %d, %v; want 429", code, err)
	}
	if err := cmd.Process.Kill(); err != nil { // SIGKILL, by pid
		t.Fatal(err)
	}
	killed := time.Now()
	_ = cmd.Wait()
	var back time.Duration
	waitFor(t, procLease+10*time.Second, "a slot back", func() bool {
		code, _, err := get(addrs[1+int(time.Since(killed)/time.Millisecond)%(procs-1)], 0, "probe")
		back = time.Since(killed)
		return err == nil && code == http.StatusOK
	})
	t.Logf("slots back %v after SIGKILL (lease %v)", back.Round(time.Millisecond), procLease)
	if back < procLease/3 || back > procLease+time.Second {
		t.Fatalf("slots back %v after SIGKILL, want within the lease of %v (and not long before)", back, procLease)
	}
	var wg sync.WaitGroup
	codes := make(chan int, procCap)
	for i := range procCap - 1 {
		wg.Go(func() {
			code, _, _ := get(addrs[1+i%(procs-1)], 300*time.Millisecond, "after")
			codes <- code
		})
	}
	wg.Wait()
	close(codes)
	for code := range codes {
		if code != http.StatusOK {
			t.Fatalf("%d concurrent requests after the slots came back: one answered %d", procCap-1, code)
		}
	}
	if !held(procCap)() { // the dead process's handlers never counted themselves out
		t.Fatalf("the survivor's request ended early: %q counted", rdb.Get(context.Background(), "inflight-test:held").Val())
	}
}

// hammer first starts two requests that outlive three leases, then sends
// every child's clients at their addresses until those end, and returns
// the most handlers in flight any answer saw, and how many answers of each
// status came back.
func hammer(t *testing.T, rdb *redis.Client, addrs []string) (int, map[int]int) {
	var (
		mu      sync.Mutex
		maxSeen int
		codes   = map[int]int{}
		wg      sync.WaitGroup
	)
	count := func(code, seen int) {
		mu.Lock()
		codes[code]++
		maxSeen = max(maxSeen, seen)
		mu.Unlock()
	}
	for i := range 2 {
		wg.Go(func() {
			code, seen, err := get(addrs[i], 3*procLease, "hammer")
			if err != nil || code != http.StatusOK {
				t.Errorf("long request: %d, %v", code, err)
			}
			count(code, seen)
		})
	}
	waitFor(t, 10*time.Second, "long requests", func() bool { return rdb.Get(context.Background(), "inflight-test:hammer").Val() == "2" })
	until := time.Now().Add(3 * procLease)
	for i := range procs * clients {
		wg.Go(func() {
			for j := 0; j < maxPerClient && time.Now().Before(until); j++ {
				code, seen, err := get(addrs[i%procs], time.Duration(5+(i*7+j*13)%30)*time.Millisecond, "hammer")
				count(code, seen)
				if err != nil {
					t.Error(err)
					return
				}
				time.Sleep(5 * time.Millisecond)
			}
		})
	}
	wg.Wait()
	return maxSeen, codes
}

var httpClient = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}

// get asks the child at addr for a request that sleeps, counted in flight
// under counter, and returns its status and the in-flight count its
// handler saw, this one included.
func get(addr string, sleep time.Duration, counter string) (int, int, error) {
	resp, err := httpClient.Get(fmt.Sprintf("http://%s/?sleep=%d&counter=%s", addr, sleep.Milliseconds(), counter))
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return resp.StatusCode, 0, err
	}
	n, err := strconv.Atoi(string(body))
	return resp.StatusCode, n, err
}

// waitFor polls cond every 20ms until it holds, and fails the test after
// within.
func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within %v", what, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// startChild starts a child process serving the middleware and returns it
// with its address. It is killed, by pid, when the test ends; closing its
// standard input stops it before.
func startChild(t *testing.T, redisAddr, rule string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestProcessChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), envChild+"=1", envAddr+"="+redisAddr, envRule+"="+rule)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "addr="); ok {
				addr <- a
			}
		}
	}()
	select {
	case a := <-addr:
		return cmd, a
	case <-time.After(30 * time.Second):
		t.Fatalf("child pid %d printed no address", cmd.Process.Pid)
	}
	return nil, ""
}

// TestProcessChild is the child side of TestCapAcrossProcesses; it does
// nothing unless started by it. It serves until its standard input closes,
// or for childLimit at most.
func TestProcessChild(t *testing.T) {
	if os.Getenv(envChild) != "1" {
		t.Skip("child process of TestCapAcrossProcesses")
	}
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv(envAddr), PoolSize: 64})
	defer rdb.Close()
	// failing closed, a slow call can deny a request but never admit one
	// past the cap
	l, err := inflight.New(rdb, inflight.WithLease(procLease), inflight.WithTimeout(5*time.Second),
		inflight.WithFailurePolicy(core.FailClosed))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	all := func(core.Request) (string, error) { return "all", nil }
	mw := inflight.MustMiddleware(l, inflight.Rule{Name: os.Getenv(envRule), Limit: procCap, Key: all})
	srv := &http.Server{Handler: mw(countingHandler(rdb)), ReadHeaderTimeout: 10 * time.Second}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	fmt.Printf("addr=%s\n", ln.Addr())
	stopped := make(chan struct{})
	go func() { _, _ = io.Copy(io.Discard, os.Stdin); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(childLimit):
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = srv.Shutdown(ctx)
}

// countingHandler counts itself in flight in Redis, apart from the
// limiter, sleeps as asked, and answers the count it saw.
func countingHandler(rdb *redis.Client) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := context.WithoutCancel(r.Context())
		counter := "inflight-test:" + r.URL.Query().Get("counter")
		n, err := rdb.Incr(ctx, counter).Result()
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		defer rdb.Decr(ctx, counter)
		ms, _ := strconv.Atoi(r.URL.Query().Get("sleep"))
		time.Sleep(time.Duration(ms) * time.Millisecond)
		fmt.Fprint(w, n)
	})
}
