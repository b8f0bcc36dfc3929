package monitor

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

// NATSStatus is the NATS section of /status for the served engine s.
func NATSStatus(s Server) *StatusNATS {
	nc, info := s.NATSConn(), s.NATSInfo()
	cs := nc.Stats()
	n := &StatusNATS{
		Embedded: info.Embedded, Status: nc.Status().String(), Connected: nc.Status() == nats.CONNECTED,
		URL: nc.ConnectedUrlRedacted(), ServerName: nc.ConnectedServerName(), ServerVersion: nc.ConnectedServerVersion(),
		Subjects: info.Subjects, QueueGroup: info.QueueGroup, JetStream: info.JetStreamStream, Clients: info.Clients,
		InMsgs: cs.InMsgs, OutMsgs: cs.OutMsgs, InBytes: cs.InBytes, OutBytes: cs.OutBytes, Reconnects: cs.Reconnects,
	}
	if info.JetStreamStream != "" {
		n.Subjects = nil
	}
	if in := s.Ingress(); in != nil {
		if p := in.Partitions(); p != nil {
			sp := &StatusPartitions{Count: p.Count, Owned: p.OwnedNow(), Mode: "single-copy", Ownership: "config"}
			if sp.Owned == nil {
				sp.Owned = []int{}
			}
			if info.OwnershipEngineID != "" {
				sp.Ownership, sp.EngineID = "kv", info.OwnershipEngineID
			}
			if floors := in.ReplicatedFloors(); floors != nil {
				sp.Mode, sp.Floors = "replicated", map[string]uint64{}
				for part, f := range floors {
					sp.Floors[strconv.Itoa(part)] = f
				}
				sp.Taken, sp.Engines = in.ReplicatedTaken(), in.ReplicatedEngines()
			}
			n.Partitions = sp
		}
	}
	return n
}
