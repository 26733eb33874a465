package record

import "testing"

func TestCrowds(t *testing.T) {
	h := func(w int, start, end int64) Held { return Held{Worker: w, N: 1, Key: "k", Start: start, End: end} }
	for _, tc := range []struct {
		name    string
		held    []Held
		roles   map[[2]int]string
		permits int
		want    int
	}{
		{"two permits of two", []Held{h(1, 0, 10), h(2, 5, 15)}, map[[2]int]string{{1, 1}: RolePermit, {2, 1}: RolePermit}, 2, 0},
		{"three permits of two", []Held{h(1, 0, 10), h(2, 5, 15), h(3, 8, 20)}, map[[2]int]string{{1, 1}: RolePermit, {2, 1}: RolePermit, {3, 1}: RolePermit}, 2, 1},
		{"readers share", []Held{h(1, 0, 10), h(2, 5, 15)}, map[[2]int]string{{1, 1}: RoleRead, {2, 1}: RoleRead}, 0, 0},
		{"writer and reader", []Held{h(1, 0, 10), h(2, 5, 15)}, map[[2]int]string{{1, 1}: RoleWrite, {2, 1}: RoleRead}, 0, 1},
		{"writer after readers", []Held{h(1, 0, 10), h(2, 5, 15), h(3, 16, 20)}, map[[2]int]string{{1, 1}: RoleRead, {2, 1}: RoleRead, {3, 1}: RoleWrite}, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := len(Crowds(tc.held, tc.roles, tc.permits, nil)); got != tc.want {
				t.Errorf("got %d crowds, want %d", got, tc.want)
			}
		})
	}
}
