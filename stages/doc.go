// Package stages is the plumbing every pipeline stage shares, standard library only: Group runs
// named stage loops and turns the first error into a shutdown of all of them; Watermark publishes
// an offset that only moves up and lets anyone wait for it; Drain batches what a channel already
// holds. Stages never import one another: they meet through these types, the channels the engine
// makes, and the small interfaces each consumer defines.
package stages
