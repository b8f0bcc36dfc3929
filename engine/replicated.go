package engine

import (
	"errors"
)

// checkReplicated refuses replicated mode on an embedded server without JetStream: the
// partitions' streams could never be made (an external server's JetStream may be on its way:
// the engine waits for it).
func (s *Server) checkReplicated(nopts NATSOptions) error {
	if nopts.Replicated != nil && s.nats != nil && !s.nats.JetStreamEnabled() {
		return errors.New("replicated mode needs JetStream: the embedded server has none (give it a jetstream block in --nats-config, on a cluster of three)")
	}
	return nil
}

// ReplicatedStarted is closed, in replicated mode, once every partition's stream and consumer
// are open and the partitions are spread over the live engines; at once otherwise. Serve
// returns before that: a JetStream cluster still forming is waited for as long as it takes.
func (s *Server) ReplicatedStarted() <-chan struct{} { return s.ing.ReplicatedStarted() }
