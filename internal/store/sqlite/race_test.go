//go:build race

package sqlite

// raceEnabled says the tests run under the race detector, which makes
// SQLite itself, compiled Go, some twenty times slower.
const raceEnabled = true
