package adapter

import "testing"

// A held meter's charge waits for the last hold's release, runs once, and
// sees the units counted until then; an unheld meter's is not kept.
func TestMeterHold(t *testing.T) {
	var m Meter
	if m.later(func() {}) {
		t.Fatal("an unheld meter kept its charge")
	}
	first, second := m.Hold(), m.Hold()
	charged, seen := 0, 0
	if !m.later(func() { charged++; seen = m.Units() }) {
		t.Fatal("a held meter did not keep its charge")
	}
	m.Add(5)
	first()
	first()
	if charged != 0 {
		t.Fatal("charged before the last hold's release")
	}
	m.Add(2)
	second()
	second()
	if charged != 1 || seen != 7 {
		t.Errorf("charged %d times, seeing %d units; want once, seeing 7", charged, seen)
	}
	var none *Meter
	none.Hold()()
	if none.later(func() {}) {
		t.Error("a nil meter kept a charge")
	}
}
