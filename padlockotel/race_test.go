//go:build race

package padlockotel_test

// raceEnabled tells the allocation tests that the race detector adds its own.
const raceEnabled = true
