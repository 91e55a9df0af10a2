package browsertest

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/internal/redistest"
	"github.com/ratekit/ratekit/redisstore"
)

// root is the repository's root, seen from this package.
const root = "../.."

// chromium returns the browser's path, or skips the test where it is
// missing, unless CI=true, where it fails.
func chromium(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("chromium is not installed (.ci/run installs it)")
	}
	t.Skip("chromium is not installed: apt-get install chromium")
	return ""
}

// buildApp builds the nethttp example app into a temporary directory.
func buildApp(t *testing.T) string {
	bin := filepath.Join(t.TempDir(), "app")
	cmd := exec.Command("go", "build", "-o", bin, "./examples/nethttp")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the app: %v\n%s", err, out)
	}
	return bin
}

var listening = regexp.MustCompile(`msg="[^"]* example listening" url=(http://\S+)`)

// startApp starts the app and returns its base URL; it is killed when the
// test ends.
func startApp(t *testing.T, bin string, args []string, env ...string) string {
	cmd := exec.Command(bin, append([]string{"-addr", "127.0.0.1:0", "-timeout", "1s"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var logs strings.Builder
	urls := make(chan string, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			mu.Lock()
			logs.WriteString(sc.Text() + "\n")
			mu.Unlock()
			if m := listening.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case urls <- m[1]:
				default:
				}
			}
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
		_ = cmd.Wait()
		if t.Failed() {
			mu.Lock()
			t.Logf("app log:\n%s", logs.String())
			mu.Unlock()
		}
	})
	select {
	case u := <-urls:
		return u
	case <-done:
		t.Fatal("the app exited before listening")
	case <-time.After(60 * time.Second):
		t.Fatal("the app did not listen within a minute")
	}
	return ""
}

func get(t *testing.T, url string) int {
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestLivePageInBrowser starts two processes of the nethttp example app
// on one redis-server, exceeds the strict rule (2 per hour) for one client
// from both, and checks in chromium that within seconds the page shows the
// client among the strict rule's offenders, this process's and the
// fleet's, and denials in its chart, without console errors; that a peek
// shows what Limiter.Peek returns; and that a reset without the token is
// refused and one with it frees the client. With UPDATE_SCREENSHOT=1 it
// writes docs/live-page.png.
func TestLivePageInBrowser(t *testing.T) {
	browser := chromium(t)
	redistest.Require(t)
	srv := redistest.StartServer(t)
	bin := buildApp(t)
	args := []string{"-redis", "redis://" + srv.Addr(), "-show-identities", "-period", "1h"}
	a := startApp(t, bin, args, "ADMIN_TOKEN=tok")
	b := startApp(t, bin, args, "ADMIN_TOKEN=tok")
	// 7 of the default rule's 10, 5 past the strict rule's 2
	for i := range 6 {
		get(t, []string{a, b}[i%2]+"/strict")
	}
	if code := get(t, b+"/strict"); code != 429 {
		t.Fatalf("GET /strict after 6: %d, want 429", code)
	}

	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(browser),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.NoFirstRun,
		chromedp.UserDataDir(t.TempDir()),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()

	var mu sync.Mutex
	var consoleErrors []string
	err := chromedp.Listen(ctx, func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch ev := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			if ev.Type == runtime.ConsoleAPICalledTypeError {
				consoleErrors = append(consoleErrors, fmt.Sprintf("console.error %v", ev.Args))
			}
		case *runtime.EventExceptionThrown:
			consoleErrors = append(consoleErrors, fmt.Sprintf("exception: %s %v", ev.ExceptionDetails.Text, ev.ExceptionDetails.Exception))
		case *log.EventEntryAdded:
			if ev.Entry.Level == log.EntryLevelError {
				consoleErrors = append(consoleErrors, ev.Entry.Text+" "+ev.Entry.URL)
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	errorsSoFar := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), consoleErrors...)
	}
	if _, err := chromedp.Call(ctx, log.Enable, cdp.Empty{}); err != nil {
		t.Fatal(err)
	}

	const (
		processRow = `table.offenders[data-rule="strict"][data-kind="process"] td.identity`
		fleetRow   = `table.offenders[data-rule="strict"][data-kind="fleet"] td.identity`
		chart      = `.rule[data-rule="strict"] svg.chart`
	)
	shows := fmt.Sprintf(`(() => {
		const has = (sel) => [...document.querySelectorAll(sel)].some(td => td.textContent === "ip:127.0.0.1");
		const c = document.querySelector(%q);
		return has(%q) && has(%q) && c !== null && Number(c.dataset.denied) > 0;
	})()`, chart, processRow, fleetRow)
	start := time.Now()
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1100, 1250), chromedp.Navigate(a+"/ratekit/")); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](shows, chromedp.WithPollingTimeout(30*time.Second))); err != nil {
		t.Fatalf("the page never showed ip:127.0.0.1 under strict, here and in the fleet, with denials charted: %v", err)
	}
	t.Logf("the page showed the offender and the denials %v after loading", time.Since(start).Round(100*time.Millisecond))
	// the fleet's count is exact (the summaries are far from full): 4 of
	// the 6 requests and the one more to b, once both have published
	fleetCount := `document.querySelector('table.offenders[data-rule="strict"][data-kind="fleet"] td.denied-count').textContent === "5"`
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](fleetCount, chromedp.WithPollingTimeout(30*time.Second))); err != nil {
		t.Fatalf("the page never showed ip:127.0.0.1 under strict, here and in the fleet, with denials charted: %v", err)
	}
	t.Logf("the fleet's count of the denials was exact %v after loading", time.Since(start).Round(100*time.Millisecond))

	// a peek shows what Limiter.Peek returns
	if err := chromedp.Do(ctx,
		setValue("identity", "ip:127.0.0.1"),
		chromedp.Click(chromedp.ID("peek")),
		chromedp.WaitVisible(chromedp.CSS(`#quota tr[data-rule="strict"] td.remaining`)),
	); err != nil {
		t.Fatal(err)
	}
	remaining, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`#quota tr[data-rule="strict"] td.remaining`)))
	if err != nil {
		t.Fatal(err)
	}
	store, err := redisstore.New(srv.Client(t))
	if err != nil {
		t.Fatal(err)
	}
	l, err := core.NewLimiter(store, core.WithTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	strict := core.Rule{Name: "strict", Limit: core.Limit{Rate: 2, Period: time.Hour, Burst: 2}, Key: func(core.Request) (string, error) { return "", nil }}
	want, err := l.Peek(context.Background(), strict, "ip:127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	if remaining != strconv.Itoa(want.Remaining) {
		t.Errorf("the page's peek says %s remaining, Limiter.Peek %d", remaining, want.Remaining)
	}

	if os.Getenv("UPDATE_SCREENSHOT") == "1" {
		png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, "docs", "live-page.png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if errs := errorsSoFar(); len(errs) > 0 {
		t.Errorf("console errors: %q", errs)
	}

	// a reset without the token is refused; the client stays denied
	if err := chromedp.Do(ctx,
		setValue("rule", "strict"),
		setValue("token", ""),
		chromedp.Click(chromedp.ID("reset")),
	); err != nil {
		t.Fatal(err)
	}
	result, err := chromedp.Run(ctx, chromedp.Poll[string](`document.getElementById("result").textContent.startsWith("reset refused") && document.getElementById("result").textContent`,
		chromedp.WithPollingTimeout(10*time.Second)))
	if err != nil {
		t.Fatalf("a reset without the token: %v", err)
	}
	if !strings.Contains(result, "401") {
		t.Errorf("a reset without the token says %q, want a 401", result)
	}
	if code := get(t, b+"/strict"); code != 429 {
		t.Errorf("GET /strict after a refused reset: %d, want 429", code)
	}
	// with the token it frees the client, on every process
	if err := chromedp.Do(ctx,
		setValue("token", "tok"),
		chromedp.Click(chromedp.ID("reset")),
	); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.getElementById("result").textContent.startsWith("reset: done")`,
		chromedp.WithPollingTimeout(10*time.Second))); err != nil {
		t.Fatalf("a reset with the token: %v", err)
	}
	// the reset reaches b's denied-key cache over Redis pub/sub, after the
	// reset's own answer; b denies from its cache, spending nothing, until
	// the message lands
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		code := get(t, b+"/strict")
		if code == 200 {
			break
		}
		if code != 429 || time.Now().After(deadline) {
			t.Fatalf("GET /strict on the other process after the reset: %d, want 200 within 10s", code)
		}
	}
	// the only error logged since is the refused reset's 401
	for _, e := range errorsSoFar() {
		if !strings.Contains(e, "401") {
			t.Errorf("console error: %s", e)
		}
	}
}

// setValue sets the value of the element of the given id.
func setValue(id, value string) chromedp.Action[chromedp.Void] {
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		_, err := chromedp.Evaluate[bool](fmt.Sprintf(`(document.getElementById(%q).value = %q, true)`, id, value))(ctx, t)
		return chromedp.Void{}, err
	}
}
