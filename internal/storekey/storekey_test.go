package storekey_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/ratekit/ratekit/internal/storekey"
)

// FuzzKey checks the key builder: no panic, the hash tag is exactly the
// (possibly hashed) identity, and two identities never share a key.
func FuzzKey(f *testing.F) {
	f.Add("ip:192.0.2.1", "user:42")
	f.Add("{evil}", "evil")
	f.Add("a}b{c", "a")
	f.Add("#0123", "#0123x")
	f.Add(strings.Repeat("x", 200), strings.Repeat("x", 128))
	f.Add("user:\x00", "user:")
	f.Add("", "ip:::1")
	f.Fuzz(func(t *testing.T, id1, id2 string) {
		k1, err1 := storekey.Key("rk:", "rule", id1)
		k2, err2 := storekey.Key("rk:", "rule", id2)
		for _, c := range []struct {
			id, key string
			err     error
		}{{id1, k1, err1}, {id2, k2, err2}} {
			if c.id == "" {
				if !errors.Is(c.err, storekey.ErrInvalidIdentity) {
					t.Fatalf("empty identity: err = %v", c.err)
				}
				continue
			}
			if c.err != nil {
				t.Fatalf("Key(%q): %v", c.id, c.err)
			}
			tag := hashTag(c.key)
			if !strings.HasPrefix(c.key, "rk:rule:{") || c.key != "rk:rule:{"+tag+"}" {
				t.Fatalf("Key(%q) = %q: hash tag %q is not the whole identity", c.id, c.key, tag)
			}
			if tag != c.id && !(tag[0] == '#' && len(tag) == 65) {
				t.Fatalf("Key(%q) = %q: identity neither kept nor hashed", c.id, c.key)
			}
			if len(c.key) > len("rk:rule:{}")+storekey.MaxIdentityLen+1 {
				t.Fatalf("Key(%q) is %d bytes long", c.id, len(c.key))
			}
		}
		// an override key is its storage key's, in the same slot, and
		// equals no storage key
		k, o, err := storekey.KeyAndOverride("rk:", "rule", id1)
		if k != k1 || (err != nil) != (err1 != nil) {
			t.Fatalf("KeyAndOverride(%q) = %q, %v; Key = %q, %v", id1, k, err, k1, err1)
		}
		if err == nil && (o != k1+storekey.OverrideSuffix || hashTag(o) != hashTag(k1) || o == k2) {
			t.Fatalf("KeyAndOverride(%q): override key %q (storage keys %q, %q)", id1, o, k1, k2)
		}
		if err1 == nil && err2 == nil && id1 != id2 && k1 == k2 {
			t.Fatalf("identities %q and %q share key %q", id1, id2, k1)
		}
	})
}

// hashTag returns the part of key that Redis Cluster hashes: the text
// between the first '{' and the next '}', when not empty, else all of key.
func hashTag(key string) string {
	i := strings.IndexByte(key, '{')
	if i < 0 {
		return key
	}
	j := strings.IndexByte(key[i+1:], '}')
	if j <= 0 {
		return key
	}
	return key[i+1 : i+1+j]
}

func TestValidateName(t *testing.T) {
	tests := []struct {
		s       string
		emptyOK bool
		ok      bool
	}{
		{"api", false, true},
		{"", true, true},
		{"", false, false},
		{"a{b", false, false},
		{"a}b", false, false},
		{"a\nb", false, false},
		{"a\x7fb", false, false},
		{strings.Repeat("x", storekey.MaxNameLen), false, true},
		{strings.Repeat("x", storekey.MaxNameLen+1), false, false},
	}
	for _, tt := range tests {
		err := storekey.ValidateName("rule name", tt.s, tt.emptyOK)
		if (err == nil) != tt.ok || (err != nil && !errors.Is(err, storekey.ErrInvalidName)) {
			t.Errorf("ValidateName(%q, %v) = %v, want ok %v", tt.s, tt.emptyOK, err, tt.ok)
		}
	}
}
