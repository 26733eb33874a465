package hashslot

import "testing"

func TestSlotMatchesRedis(t *testing.T) {
	// Reference values from CLUSTER KEYSLOT.
	for _, tc := range []struct {
		key  string
		want int
	}{
		{"foo", 12182},
		{"bar", 5061},
		{"{user1000}.following", 3443},
		{"{user1000}.followers", 3443},
		{"foo{}{bar}", 8363},
		{"foo{{bar}}zap", 4015},
		{"foo{bar}{zap}", 5061},
		{"123456789", 12739},
	} {
		if got := Slot(tc.key); got != tc.want {
			t.Errorf("Slot(%q): got %d, want %d", tc.key, got, tc.want)
		}
	}
}

func TestOfHashesAllOfIt(t *testing.T) {
	for _, tc := range []struct {
		s    string
		want int
	}{
		{"foo", 12182},       // no tag: as Slot
		{"user1000", 3443},   // what Slot hashes of {user1000}.following
		{"{user1000}", 8534}, // the braces too, no tag rule (Python: binascii.crc_hqx)
		{"123456789", 12739},
	} {
		if got := Of(tc.s); got != tc.want {
			t.Errorf("Of(%q): got %d, want %d", tc.s, got, tc.want)
		}
	}
}

func TestTagsCoverEverySlot(t *testing.T) {
	for s, tag := range Tags() {
		if tag == "" || Slot(tag) != s {
			t.Fatalf("slot %d: tag %q hashes to %d", s, tag, Slot(tag))
		}
	}
}
