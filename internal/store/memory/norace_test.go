//go:build !race

package memory

// raceEnabled says the tests run under the race detector, which makes
// seeding 100,000 sessions take seconds.
const raceEnabled = false
