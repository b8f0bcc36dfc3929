package ingress

// startRoundRobinAt sets the round-robin position of subject's topic, so that a test starts the
// counter at its limits instead of running 2^31 messages to get there.
func (r *router) startRoundRobinAt(subject string, pos uint64) {
	r.route(subject).state.next.Store(pos)
}
