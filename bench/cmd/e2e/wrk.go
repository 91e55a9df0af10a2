package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// wrkResult is what one wrk run reports.
type wrkResult struct {
	requests  int64         // completed requests
	elapsed   time.Duration // wrk's own measure of the run
	perSecond float64       // "Requests/sec"
	p50, p99  time.Duration // from --latency's distribution
	non2xx    int64         // "Non-2xx or 3xx responses"
	// socket errors: connect, read, write, timeout
	connectErrs, readErrs, writeErrs, timeouts int64
	cpu                                        time.Duration // wrk's own CPU time, user and system
}

// failures returns the requests that did not get a 2xx or 3xx answer in
// time, of every kind.
func (r wrkResult) failures() int64 {
	return r.non2xx + r.connectErrs + r.readErrs + r.writeErrs + r.timeouts
}

// wrkSettings are the load generator's fixed settings.
type wrkSettings struct {
	threads, connections int
	timeout              time.Duration // wrk's --timeout: a slower answer counts as a timeout
}

// runWrk runs wrk against url for d and parses its report. wrk is killed
// (by its pid, through exec.CommandContext) if it outlives d by a minute or
// ctx ends.
func runWrk(ctx context.Context, s wrkSettings, url string, d time.Duration) (wrkResult, string, error) {
	ctx, cancel := context.WithTimeout(ctx, d+time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "wrk",
		"-t", strconv.Itoa(s.threads), "-c", strconv.Itoa(s.connections),
		"-d", wholeSeconds(d),
		"--timeout", wholeSeconds(s.timeout),
		"--latency", url)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return wrkResult{}, string(out), fmt.Errorf("wrk %s: %w\n%s", url, err, out)
	}
	r, err := parseWrk(string(out))
	if err != nil {
		return wrkResult{}, string(out), fmt.Errorf("wrk %s: %w\n%s", url, err, out)
	}
	r.cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	return r, string(out), nil
}

// wholeSeconds formats d for wrk, which takes times in s, m or h only:
// whole seconds, rounded up, at least 1.
func wholeSeconds(d time.Duration) string {
	return strconv.FormatInt(max(1, int64((d+time.Second-1)/time.Second)), 10) + "s"
}

// parseWrk reads the text report of wrk 4 run with --latency.
func parseWrk(out string) (wrkResult, error) {
	var r wrkResult
	var haveTotal, haveRate, have50, have99 bool
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		f := strings.Fields(line)
		switch {
		case len(f) == 2 && f[0] == "50%":
			d, err := parseWrkDuration(f[1])
			if err != nil {
				return r, fmt.Errorf("p50: %w", err)
			}
			r.p50, have50 = d, true
		case len(f) == 2 && f[0] == "99%":
			d, err := parseWrkDuration(f[1])
			if err != nil {
				return r, fmt.Errorf("p99: %w", err)
			}
			r.p99, have99 = d, true
		case len(f) >= 4 && f[1] == "requests" && f[2] == "in":
			// "245678 requests in 10.00s, 30.12MB read"
			n, err := strconv.ParseInt(f[0], 10, 64)
			if err != nil {
				return r, fmt.Errorf("request count: %w", err)
			}
			d, err := parseWrkDuration(strings.TrimSuffix(f[3], ","))
			if err != nil {
				return r, fmt.Errorf("run time: %w", err)
			}
			r.requests, r.elapsed, haveTotal = n, d, true
		case strings.HasPrefix(line, "Requests/sec:") && len(f) == 2:
			x, err := strconv.ParseFloat(f[1], 64)
			if err != nil {
				return r, fmt.Errorf("requests/s: %w", err)
			}
			r.perSecond, haveRate = x, true
		case strings.HasPrefix(line, "Non-2xx or 3xx responses:") && len(f) == 5:
			n, err := strconv.ParseInt(f[4], 10, 64)
			if err != nil {
				return r, fmt.Errorf("non-2xx count: %w", err)
			}
			r.non2xx = n
		case strings.HasPrefix(line, "Socket errors:"):
			// "Socket errors: connect 0, read 0, write 0, timeout 3"
			rest := strings.Fields(strings.ReplaceAll(strings.TrimPrefix(line, "Socket errors:"), ",", " "))
			if len(rest)%2 != 0 {
				return r, fmt.Errorf("socket errors line %q", line)
			}
			for i := 0; i < len(rest); i += 2 {
				n, err := strconv.ParseInt(rest[i+1], 10, 64)
				if err != nil {
					return r, fmt.Errorf("socket errors line %q: %w", line, err)
				}
				switch rest[i] {
				case "connect":
					r.connectErrs = n
				case "read":
					r.readErrs = n
				case "write":
					r.writeErrs = n
				case "timeout":
					r.timeouts = n
				default:
					return r, fmt.Errorf("socket errors line %q: unknown kind %q", line, rest[i])
				}
			}
		}
	}
	var missing []string
	for _, m := range []struct {
		ok   bool
		name string
	}{{haveTotal, "request count"}, {haveRate, "Requests/sec"}, {have50, "p50 (run wrk with --latency)"}, {have99, "p99"}} {
		if !m.ok {
			missing = append(missing, m.name)
		}
	}
	if len(missing) > 0 {
		return r, errors.New("no " + strings.Join(missing, ", ") + " in wrk's report")
	}
	return r, nil
}

// parseWrkDuration reads a time as wrk prints it: a number and one of the
// units us, ms, s, m, h.
func parseWrkDuration(s string) (time.Duration, error) {
	units := []struct {
		suffix string
		unit   time.Duration
	}{{"us", time.Microsecond}, {"ms", time.Millisecond}, {"s", time.Second}, {"m", time.Minute}, {"h", time.Hour}}
	for _, u := range units {
		if num, ok := strings.CutSuffix(s, u.suffix); ok {
			x, err := strconv.ParseFloat(num, 64)
			if err != nil || x < 0 {
				return 0, fmt.Errorf("bad time %q", s)
			}
			return time.Duration(x * float64(u.unit)), nil
		}
	}
	return 0, fmt.Errorf("bad time %q: no unit", s)
}

// wrkVersion returns the first line of wrk -v (which exits 1), or
// "unknown".
func wrkVersion() string {
	out, _ := exec.Command("wrk", "-v").CombinedOutput()
	line, _, _ := strings.Cut(string(out), "\n")
	line = strings.TrimSpace(line)
	if v, _, ok := strings.Cut(line, " Copyright"); ok {
		line = v
	}
	if line == "" {
		return "unknown"
	}
	return line
}
