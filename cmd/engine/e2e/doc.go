// Package e2e proves the promises of README.md and docs/ from outside, as the engine's users
// meet them: the engine binary, built once by TestMain, runs as a child process on a store in
// t.TempDir(); the tests send it real signals (SIGTERM, SIGKILL, SIGHUP), restart it on the same
// store, run its read commands and parse what they print, and talk to it over NATS with plain
// nats.go, encoding/json and the standard library only, the way a client written from the
// documentation would. No package of the engine is imported: a test that needs a fact about the
// store reads it through the binary, as a user would.
//
// docs/PROMISES.md lists every promise with the test that proves it. A test of a promise known to
// be broken (issue 16) is skipped with the item it waits for, so that it can be turned on once
// the fix is merged.
//
// The package holds no code of its own: its files are this comment and tests, with the harness
// in harness_test.go (the binary, the child process) and client_test.go (the commands, the wire
// client).
package e2e
