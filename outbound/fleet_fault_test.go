package outbound_test

import (
	"net/http"
	"testing"
	"time"
)

// TestFleetUpstreamCloses: the upstream closes for two seconds mid-run,
// answering 429 with Retry-After, then halves its limit for good. The first
// 429 pauses every process: at most two 429s for the signal, and nothing
// else reaches the upstream until Retry-After has passed. With adaptation
// on, the 429s of the halved limit die out and its new limit is used (≥ 90%).
func TestFleetUpstreamCloses(t *testing.T) {
	fleetRun(t)
	const (
		closeAt, closedFor = 2 * time.Second, 2 * time.Second
		run                = 15 * time.Second
		settled            = 11500 * time.Millisecond // the adaptation has settled by then
	)
	for _, aimd := range []bool{true, false} {
		name := map[bool]string{true: "aimd", false: "no aimd"}[aimd]
		t.Run(name, func(t *testing.T) {
			if !aimd && !*table {
				t.Skip("measured for the table only (-outbound.table)")
			}
			f := newFleet(t)
			c := loadOf(true, 3, run)
			c.AIMD = aimd
			f.launch(c)
			f.at(closeAt)
			f.up.close(closedFor)
			f.up.setLimit(upstreamRate / 2)
			clients := f.wait()
			log := f.up.log()
			closedTo := closeAt + closedFor
			signal := 0
			var first time.Time
			for _, a := range log {
				if in := a.at.Sub(f.start); in >= closeAt && in < closedTo {
					if first.IsZero() {
						first = a.at.Add(a.retry)
					}
					signal++
				}
			}
			after := measure(log, f.start, closedTo, settled, upstreamRate/2, clients)
			s := measure(log, f.start, settled, run, upstreamRate/2, clients)
			row(t, "closes, then halves ("+name+"): signal", stats{refused: signal})
			row(t, "closes, then halves ("+name+"): while adapting", after)
			row(t, "closes, then halves ("+name+"): settled", s)
			if signal > 2 {
				t.Errorf("%d 429s for one signal, want at most 2", signal)
			}
			if !aimd {
				return
			}
			if s.refused > 0 {
				t.Errorf("%d 429s once settled: they did not die out", s.refused)
			}
			if s.util < 0.90 {
				t.Errorf("utilization of the halved limit %.1f%%, want at least 90%%", 100*s.util)
			}
			if s.late > 0 {
				t.Errorf("%d requests arrived after their deadline", s.late)
			}
		})
	}
}

// TestFleetRedisOutage: Redis is killed mid-run and restarted empty two
// seconds later. Each process goes on at its share of the rate (a quarter,
// the fleet it learned), never at the whole rate, and comes back to Redis
// by itself.
func TestFleetRedisOutage(t *testing.T) {
	fleetRun(t)
	const run = 7 * time.Second
	f := newFleet(t)
	f.launch(loadOf(true, 3, run))
	f.at(2 * time.Second)
	f.redis.Kill(t)
	f.at(4 * time.Second)
	f.redis.Restart(t)
	clients := f.wait()
	log := f.up.log()
	s := measure(log, f.start, time.Second, run, upstreamRate, clients)
	during := measure(log, f.start, 2*time.Second, 4*time.Second, upstreamRate, clients)
	back := measure(log, f.start, 5*time.Second, run, upstreamRate, clients)
	row(t, "Redis killed 2 s, restarted: whole run", s)
	row(t, "Redis killed 2 s, restarted: outage", during)
	row(t, "Redis killed 2 s, restarted: after", back)
	// Each process's share is a whole number of units per period, so the
	// shares alone keep every second under the rate; the switches to and
	// from them are not in step across processes, and are bounded by one
	// share's burst per process (docs/outbound.md).
	if bound := upstreamRate + fleetSize; s.maxWindow > bound {
		t.Errorf("the upstream saw %d requests in one second, over %d", s.maxWindow, bound)
	}
	if during.maxWindow >= 2*upstreamRate/fleetSize*fleetSize {
		t.Errorf("the upstream saw %d requests in a second of the outage: a process took more than its share", during.maxWindow)
	}
	if during.util < 0.5 {
		t.Errorf("utilization %.1f%% during the outage: the processes stopped instead of taking their share", 100*during.util)
	}
	// back on Redis by itself: every process's turns come from Redis again
	// within two seconds of the restart (its breaker probes it every second
	// at most), and keep the upstream busy; the switch back costs some
	// turns (66 to 79% of the rate in the second and third seconds after
	// the restart, on a quiet two-core machine)
	for i, c := range clients {
		switch {
		case c == nil:
			t.Errorf("client %d: no result", i)
		case c.LastDegraded == 0:
			t.Errorf("client %d: no turn without Redis, during the outage either", i)
		case c.LastOnRedis <= c.LastDegraded:
			t.Errorf("client %d: its last turn was without Redis, %v into the run", i, time.Unix(0, c.LastDegraded).Sub(f.start))
		case time.Unix(0, c.LastDegraded).After(f.start.Add(6 * time.Second)):
			t.Errorf("client %d: a turn without Redis %v into the run, more than 2 s after the restart", i, time.Unix(0, c.LastDegraded).Sub(f.start))
		}
	}
	if back.util < 0.5 {
		t.Errorf("utilization %.1f%% after the restart, want at least 50%%", 100*back.util)
	}
}

// TestFleetClientKilled: a client process is killed (SIGKILL) while it
// holds a second of turns. Its turns go unused; the others keep the
// upstream under its rate and, once the dead process's turns have passed,
// use it all between them, fairly.
func TestFleetClientKilled(t *testing.T) {
	fleetRun(t)
	const run = 6 * time.Second
	f := newFleet(t)
	f.launch(loadOf(true, 3, run))
	f.at(2 * time.Second)
	if err := f.procs[0].Process.Kill(); err != nil {
		t.Fatal(err)
	}
	clients := f.wait()
	log := f.up.log()
	s := measure(log, f.start, time.Second, run, upstreamRate, clients)
	after := measure(log, f.start, 2*time.Second+budget, run, upstreamRate, clients)
	row(t, "client killed holding turns: whole run", s)
	row(t, "client killed holding turns: after its turns", after)
	if s.maxWindow > upstreamRate {
		t.Errorf("the upstream saw %d requests in one second, over its %d", s.maxWindow, upstreamRate)
	}
	if s.refused > 0 || s.late > 0 {
		t.Errorf("%d 429s, %d late", s.refused, s.late)
	}
	if after.util < 0.95 {
		t.Errorf("utilization %.1f%% after the dead process's turns, want at least 95%%", 100*after.util)
	}
	// At three times the rate, a turn freed goes to the first request to
	// reach Redis with its budget still covering the wait, so a process
	// whose requests reach it a little later, one the machine schedules
	// less, loses most contested turns: 0.971 to 0.994 in 6 runs on a
	// quiet two-core machine, 0.939 once under CI's load ([55 59 31]).
	// Starving a survivor ([55 59 20]) gives 0.87.
	if after.jain < 0.9 {
		t.Errorf("Jain's fairness of the survivors %.3f, want at least 0.9", after.jain)
	}
	for _, a := range log {
		if a.client == 0 && a.at.Sub(f.start) > 2*time.Second+100*time.Millisecond && a.status == http.StatusOK {
			t.Fatalf("the killed process sent at %v", a.at.Sub(f.start))
		}
	}
}
