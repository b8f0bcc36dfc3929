//go:build race

package e2e

// raceEnabled tells TestMain to build the engine with -race too: the build then reuses what
// the test build compiled, and the children are checked for races as the tests are.
const raceEnabled = true
