package engine

import (
	"strconv"

	"github.com/nats-io/nats.go"
)

// StatusNATS is the engine's NATS connection.
type StatusNATS struct {
	Embedded      bool     `json:"embedded"`
	Status        string   `json:"status"`
	Connected     bool     `json:"connected"`
	URL           string   `json:"url,omitempty"`
	ServerName    string   `json:"server_name,omitempty"`
	ServerVersion string   `json:"server_version,omitempty"`
	Subjects      []string `json:"subjects,omitempty"`
	QueueGroup    string   `json:"queue_group,omitempty"`
	JetStream     string   `json:"jetstream_stream,omitempty"`
	InMsgs        uint64   `json:"in_msgs"`
	OutMsgs       uint64   `json:"out_msgs"`
	InBytes       uint64   `json:"in_bytes"`
	OutBytes      uint64   `json:"out_bytes"`
	Reconnects    uint64   `json:"reconnects"`
	// Clients is the embedded server's client connections (the engine's included).
	Clients int `json:"clients,omitempty"`
	// Partitions, under partitioned ingest (docs/SCALE-OUT.md).
	Partitions *StatusPartitions `json:"partitions,omitempty"`
}

// StatusPartitions are the partitions this engine takes.
type StatusPartitions struct {
	Count int    `json:"count"`
	Owned []int  `json:"owned"`
	Mode  string `json:"mode"` // "single-copy" or "replicated"
	// Ownership is "config" or "kv" (a key-value bucket; EngineID names this engine there).
	Ownership string `json:"ownership"`
	EngineID  string `json:"engine_id,omitempty"`
	// Floors are, in replicated mode, each partition's stream sequence up to which everything is
	// durable here.
	Floors map[string]uint64 `json:"floors,omitempty"`
	// Taken are, in replicated mode, the partitions spread to this engine (the ones it pulls),
	// and Engines the live engines they were spread over (docs/SCALE-OUT.md).
	Taken   []int    `json:"taken,omitempty"`
	Engines []string `json:"engines,omitempty"`
}

func natsStatus(s *Server) *StatusNATS {
	nc := s.conn
	cs := nc.Stats()
	n := &StatusNATS{
		Embedded: s.nats != nil, Status: nc.Status().String(), Connected: nc.Status() == nats.CONNECTED,
		URL: nc.ConnectedUrlRedacted(), ServerName: nc.ConnectedServerName(), ServerVersion: nc.ConnectedServerVersion(),
		Subjects: s.subjects(), QueueGroup: s.opts.QueueGroup,
		InMsgs: cs.InMsgs, OutMsgs: cs.OutMsgs, InBytes: cs.InBytes, OutBytes: cs.OutBytes, Reconnects: cs.Reconnects,
	}
	if s.opts.JetStream != nil {
		n.JetStream = s.opts.JetStream.Stream
		n.Subjects = nil
	}
	if s.nats != nil {
		n.Clients = s.nats.NumClients()
	}
	if s.ing != nil {
		if p := s.ing.Partitions(); p != nil {
			sp := &StatusPartitions{Count: p.Count, Owned: p.OwnedNow(), Mode: "single-copy", Ownership: "config"}
			if sp.Owned == nil {
				sp.Owned = []int{}
			}
			if s.opts.Ownership != nil {
				sp.Ownership, sp.EngineID = "kv", s.opts.Ownership.EngineID
			}
			if floors := s.ing.ReplicatedFloors(); floors != nil {
				sp.Mode, sp.Floors = "replicated", map[string]uint64{}
				for part, f := range floors {
					sp.Floors[strconv.Itoa(part)] = f
				}
				sp.Taken, sp.Engines = s.ing.ReplicatedTaken(), s.ing.ReplicatedEngines()
			}
			n.Partitions = sp
		}
	}
	return n
}
