//go:build race

package redistest

// raceDetector is whether the binary runs with the race detector, which
// makes every test CPU-bound: SideBySide leaves -parallel alone then.
const raceDetector = true
