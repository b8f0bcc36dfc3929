package stages

// Drain appends to batch what ch already holds, up to max items, without blocking. ok is false
// once ch is closed and empty. A stage blocks for its first item, then drains: under load every
// slow step makes the next batch bigger, and when idle a batch is one item, so latency stays low.
func Drain[T any](ch <-chan T, batch []T, max int) (_ []T, ok bool) {
	for len(batch) < max {
		select {
		case v, ok := <-ch:
			if !ok {
				return batch, false
			}
			batch = append(batch, v)
		default:
			return batch, true
		}
	}
	return batch, true
}
