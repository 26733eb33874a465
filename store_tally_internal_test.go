package padlock

import (
	"errors"
	"testing"
	"time"
)

func TestQuorumHolderTTL(t *testing.T) {
	ms := func(d int) time.Duration { return time.Duration(d) * time.Millisecond }
	busy := func(d int) vote { return vote{busy: true, holderTTL: ms(d)} }
	tests := []struct {
		name  string
		votes []vote
		want  time.Duration
	}{
		// 5 nodes, 3 needed: 2 may stay busy.
		{"all busy: the third lease to end frees a majority", []vote{busy(500), busy(100), busy(300), busy(200), busy(400)}, ms(300)},
		{"three busy: the first lease to end", []vote{busy(300), {yes: true}, busy(100), {err: errors.New("down")}, busy(200)}, ms(100)},
		{"four busy", []vote{busy(40), busy(10), busy(30), busy(20), {yes: true}}, ms(20)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := quorumOf(len(tt.votes))
			if got := q.holderTTL(tt.votes, q.count(tt.votes).no); got != tt.want {
				t.Errorf("holderTTL = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestQuorumHolderOf(t *testing.T) {
	busy := func(owner string) vote { return vote{busy: true, holder: owner} }
	tests := []struct {
		name  string
		votes []vote
		want  string
	}{
		{"every busy node names it", []vote{busy("a"), busy("a"), {yes: true}}, "a"},
		{"the most busy nodes name it", []vote{busy("b"), busy("a"), busy("a"), busy("b"), busy("a")}, "a"},
		{"a tie: the first named", []vote{busy("b"), busy(""), busy("a"), {err: errors.New("down")}}, "b"},
		{"unnamed holders do not outvote a named one", []vote{busy(""), busy(""), busy("a")}, "a"},
		{"only votes of busy nodes count", []vote{{yes: true, holder: "x"}, {yes: true, holder: "x"}, busy("a")}, "a"},
		{"nobody named", []vote{busy(""), busy(""), {yes: true}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := holderOf(tt.votes); got != tt.want {
				t.Errorf("holderOf = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestQuorumDecide(t *testing.T) {
	yes, no, down := vote{yes: true}, vote{}, vote{err: errors.New("down")}
	tests := []struct {
		name    string
		votes   []vote
		late    time.Duration
		wantOK  bool
		wantErr bool
	}{
		{"majority yes", []vote{yes, yes, no}, 0, true, false},
		{"majority yes, one down", []vote{yes, down, yes, no, yes}, 0, true, false},
		{"majority yes, but late", []vote{yes, yes, yes}, time.Millisecond, false, true},
		{"majority no: lost", []vote{no, no, yes}, 0, false, false},
		{"more no than 5 nodes can spare", []vote{no, no, no, yes, down}, 0, false, false},
		{"too few answers to tell", []vote{yes, no, down}, 0, false, true},
		{"all down", []vote{down, down, down}, 0, false, true},
		{"two no of five, rest down", []vote{no, no, down, down, down}, 0, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ok, err := quorumOf(len(tt.votes)).decide("extend", tt.votes, tt.late)
			if ok != tt.wantOK || (err != nil) != tt.wantErr {
				t.Errorf("decide = %v, %v; want ok %v, error %v", ok, err, tt.wantOK, tt.wantErr)
			}
		})
	}
}
