// Package verify checks a whole store, read-only, and repairs one explicitly.
//
// Verify opens every file read-only and without the store's lock (it may run next to an
// engine) and checks the CommitLog record by record, every ConsumeQueue unit and IndexFile
// entry against the record it names, the index's hash chains and the checkpoint, and returns
// a Report: what it checked, each problem with its file and offset, and a verdict.
//
// Repair takes the lock and does what the engine's recovery does, but also where recovery
// refuses (damage to sealed data): it cuts the CommitLog at the first invalid record, deletes
// and rebuilds the derived files through derive's Builder (the engine's own code path), and
// rewrites the checkpoint, reporting exactly what it removed.
//
// The CommitLog is the only truth: everything else is derived from it, so a problem in a
// derived file never costs a message, while one in the CommitLog costs the records from it on.
package verify
