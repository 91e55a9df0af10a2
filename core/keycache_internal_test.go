package core

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/ratekit/ratekit/internal/storekey"
)

// remember puts key until c remembers it (put remembers one miss in
// keyRemember), and reports whether it did within many tries.
func remember(c *keyCache, prefix, rule, identity, key string) bool {
	for range 1000 * keyRemember {
		c.slot(rule, identity).put(prefix, rule, identity, key)
		if got, ok := c.slot(rule, identity).get(prefix, rule, identity); ok {
			return got == key
		}
	}
	return false
}

func TestKeyCacheRemembersPlainKeys(t *testing.T) {
	c := new(keyCache)
	key, err := storekey.Key("rk:", "api", "ip:192.0.2.1")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := c.slot("api", "ip:192.0.2.1").get("rk:", "api", "ip:192.0.2.1"); ok {
		t.Fatal("an empty cache answered")
	}
	if !remember(c, "rk:", "api", "ip:192.0.2.1", key) {
		t.Fatalf("%q was never remembered", key)
	}
	// the same slot holds it, but for another rule, prefix or identity it
	// is no answer
	for _, q := range [][3]string{
		{"rk:", "web", "ip:192.0.2.1"},
		{"xx:", "api", "ip:192.0.2.1"},
		{"rk:", "api", "ip:192.0.2.10"},
		{"rk:", "api", "ip:192.0.2."},
		{"rk:", "ap", "i:{ip:192.0.2.1"},
	} {
		if got, ok := c.slot(q[1], q[2]).get(q[0], q[1], q[2]); ok {
			t.Errorf("get(%q, %q, %q) = %q, want a miss", q[0], q[1], q[2], got)
		}
	}
}

func TestKeyCacheNeverRemembersHashedKeys(t *testing.T) {
	c := new(keyCache)
	for _, id := range []string{"a{b", "}", "#abc", "tab\there", strings.Repeat("x", storekey.MaxIdentityLen+1)} {
		key, err := storekey.Key("rk:", "api", id)
		if err != nil {
			t.Fatal(err)
		}
		if remember(c, "rk:", "api", id, key) {
			t.Errorf("the hashed key of %q was remembered", id)
		}
	}
	for i := range c.slots {
		if p := c.slots[i].ptr.Load(); p != nil {
			t.Errorf("slot %d holds a key", i)
		}
	}
}

// TestKeyCacheConcurrent has writers fill every slot with ever other
// identities while readers ask: any key a reader gets is the one
// storekey.Key builds for what it asked. Under -race it also checks the
// slots' sequence locks.
func TestKeyCacheConcurrent(t *testing.T) {
	c := new(keyCache)
	const ids = 4 * keySlots
	keys := make([]string, ids)
	for i := range keys {
		var err error
		if keys[i], err = storekey.Key("rk:", "api", fmt.Sprintf("user:%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for n := range 20000 {
				i := (n*7 + w) % ids
				id := fmt.Sprintf("user:%d", i)
				c.slot("api", id).put("rk:", "api", id, keys[i])
			}
		})
	}
	hits := make([]int, 4)
	for r := range 4 {
		wg.Go(func() {
			for n := range 20000 {
				i := (n*13 + r) % ids
				id := fmt.Sprintf("user:%d", i)
				if got, ok := c.slot("api", id).get("rk:", "api", id); ok {
					hits[r]++
					if got != keys[i] {
						t.Errorf("user:%d: got %q, want %q", i, got, keys[i])
						return
					}
				}
			}
		})
	}
	wg.Wait()
	if hits[0]+hits[1]+hits[2]+hits[3] == 0 {
		t.Error("no reader ever found a key")
	}
}

// FuzzKeyCache remembers id1's key under rule and asks for id2's: the
// answer is a miss or the key storekey.Key builds for id2.
func FuzzKeyCache(f *testing.F) {
	f.Add("api", "ip:192.0.2.1", "ip:192.0.2.1")
	f.Add("api", "ip:192.0.2.1", "ip:192.0.2.10")
	f.Add("a", "b:{c", "b:{c")
	f.Add("api", "#abc", "#abc")
	f.Add("api", "x}", "x")
	f.Add("", "user:1", "user:1")
	f.Fuzz(func(t *testing.T, rule, id1, id2 string) {
		key, err := storekey.Key("rk:", rule, id1)
		if err != nil || storekey.ValidateName("rule name", rule, false) != nil {
			return // no key to remember: the Limiter remembers built keys only
		}
		c := new(keyCache)
		for range 4 * keyRemember {
			c.slot(rule, id1).put("rk:", rule, id1, key)
		}
		got, ok := c.slot(rule, id2).get("rk:", rule, id2)
		if !ok {
			return
		}
		want, err := storekey.Key("rk:", rule, id2)
		if err != nil || got != want {
			t.Fatalf("remembered %q for %q; asked for %q, got %q (want %q, %v)", key, id1, id2, got, want, err)
		}
	})
}

// TestLimiterKeysAsBuilt asks a Limiter for the same identities many
// times, plain and hashed: planning a rule gives the key StorageKey gives.
func TestLimiterKeysAsBuilt(t *testing.T) {
	l, err := NewLimiter(downStore{}, WithPrefix("rk:"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ids := []string{"ip:192.0.2.1", "user:42", "a{b", "#x", "ip:192.0.2.1", "ip:192.0.2.2"}
	r := Rule{Name: "api", Limit: PerSecond(10)}
	for range 100 {
		for _, id := range ids {
			got, _, err := l.keysOf(&r, id)
			if err != nil {
				t.Fatal(err)
			}
			if want, _ := l.StorageKey("api", id); got != want {
				t.Fatalf("keysOf(%q) = %q, want %q", id, got, want)
			}
		}
	}
}

// BenchmarkStorageKeys measures planning a rule's storage key: built each
// time (build), or through the keys the Limiter remembers, over 100,000
// identities in turn, which it seldom finds (miss), and over one, which it
// finds (hit); at 1 goroutine and on every P:
//
//	go test -run '^$' -bench BenchmarkStorageKeys -benchmem ./core
func BenchmarkStorageKeys(b *testing.B) {
	l, err := NewLimiter(downStore{})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	ids := make([]string, 100_000)
	for i := range ids {
		ids[i] = fmt.Sprintf("ip:10.%d.%d.%d", i>>16, (i>>8)&255, i&255)
	}
	r := Rule{Name: "api", Limit: PerSecond(10)}
	paths := []struct {
		name string
		key  func(i int) (string, error)
	}{
		{"build", func(i int) (string, error) { return l.storageKey(r.Name, ids[i%len(ids)]) }},
		{"miss", func(i int) (string, error) { k, _, err := l.keysOf(&r, ids[i%len(ids)]); return k, err }},
		{"hit", func(int) (string, error) { k, _, err := l.keysOf(&r, ids[0]); return k, err }},
	}
	for _, p := range paths {
		b.Run(p.name, func(b *testing.B) {
			for i := 0; b.Loop(); i++ {
				if _, err := p.key(i); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(p.name+"/parallel", func(b *testing.B) {
			var start atomic.Int64 // each goroutine's identities start elsewhere
			b.RunParallel(func(pb *testing.PB) {
				for i := int(start.Add(12_345)); pb.Next(); i++ {
					if _, err := p.key(i); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
