package benchmarks

import (
	"time"
)

// A rough model of how fast each target goes on the 2-core machine the presets are made for,
// measured there (quick preset, 128 B, 16 topics, 4 publishers). It sizes the fire-and-forget
// runs of slow targets and estimates how long an invocation takes (the progress bar corrects
// it as runs finish); it is never a result.

// expectedRate is the messages per second a scenario is expected to take under a load.
func expectedRate(scenario string, l Load) float64 {
	ff := l.Ack == FireAndForget
	pick := func(ffRate, rrRate float64) float64 {
		if ff {
			return ffRate
		}
		return rrRate
	}
	var rate, bandwidth float64 // msgs/s at 128 B; body bytes/s
	latency := 300 * time.Microsecond
	switch scenario {
	case "ceiling-subscriber", "ceiling-responder":
		rate, bandwidth, latency = pick(1.2e6, 230e3), 2e9, 100*time.Microsecond
	case "engine-async":
		rate, bandwidth = pick(400e3, 170e3), 800e6
	case "engine-sync":
		rate, bandwidth, latency = pick(400e3, 160e3), 500e6, time.Millisecond
	case "kafka-style":
		rate, bandwidth = pick(800e3, 200e3), 800e6
	case "kafka-style-sync":
		// One fdatasync per topic file a batch touches, about 250 µs each.
		files := float64(min(l.Topics, kafkaMaxBatch))
		rate, bandwidth, latency = pick(800e3, 200e3), 500e6, time.Millisecond
		rate = min(rate, float64(kafkaMaxBatch)/(files*250e-6))
	case "jetstream-default":
		rate, bandwidth = pick(290e3, 170e3), 500e6
	case "jetstream-syncalways":
		// One sync per message, one message at a time.
		rate, bandwidth, latency = 3e3, 200e6, 300*time.Microsecond
	case "disk-ceiling":
		return 600e6 / float64(l.BodySize)
	default:
		rate, bandwidth = 100e3, 200e6
	}
	if l.Ack == Batched {
		// No reply per message: 1.1 to 1.2x request/reply (docs/BATCHED-ACKS.md).
		rate *= 1.15
	}
	rate = min(rate, bandwidth/float64(max(l.BodySize, 128)))
	if !ff {
		// At most Publishers x Window in flight, each for at least the latency.
		rate = min(rate, float64(l.Publishers*l.Window)/latency.Seconds())
	}
	return rate
}

// ffRunSeconds bounds how long a fire-and-forget run of a slow target should take; ffBytes
// bounds the body bytes of one.
const (
	ffRunSeconds = 8
	ffBytes      = 512 << 20
)

// ffCount is how many messages a fire-and-forget run of scenario under l sends: at most n and
// ffBytes of bodies, and no more than the target is expected to take in ffRunSeconds, but at
// least two per topic.
func ffCount(scenario string, l Load, n int64) int64 {
	n = min(n, ffBytes/int64(l.BodySize))
	n = min(n, int64(expectedRate(scenario, l)*ffRunSeconds))
	return max(n, 2*int64(l.Topics), 1000)
}

// Estimate is how long a run is expected to take on the presets' machine, start-up, preload,
// shutdown and verification included.
func (r Run) Estimate() time.Duration {
	l := r.Load
	rate := expectedRate(r.Scenario, l)
	est := 800 * time.Millisecond // two processes, server, segment prefault, shutdown
	sc := scenarios[r.Scenario]
	switch {
	case sc != nil && sc.Engine && !r.Target.Cold:
		// Creating, closing and reading back 4 ConsumeQueues per topic: about 2 ms each.
		est += time.Duration(l.Topics) * 8 * time.Millisecond
	case r.Scenario == "kafka-style" || r.Scenario == "kafka-style-sync":
		// Creating and reading back a file per topic.
		est += time.Duration(l.Topics) * 800 * time.Microsecond
	}
	msgs := float64(l.Messages)
	switch {
	case sc != nil && sc.SelfLoaded:
		est += l.Duration
	case l.Ack == FireAndForget && l.Duration > 0:
		// Publishing for the duration; what the target takes of it is read back.
		msgs = rate * l.Duration.Seconds()
		if l.Rate > 0 {
			msgs = min(msgs, l.Rate*l.Duration.Seconds())
		}
		est += l.Duration
	case l.Ack == FireAndForget:
		est += seconds(msgs / rate)
	default:
		msgs = rate * l.Duration.Seconds()
		if l.Rate > 0 {
			msgs = min(msgs, l.Rate*l.Duration.Seconds())
		}
		est += l.Duration + seconds(float64(l.Publishers*l.Window)/rate)
	}
	switch {
	case sc != nil && sc.Engine: // the store read back two ways
		est += seconds(msgs / 1e6)
	case sc != nil && sc.Reference != "": // JetStream restarted and read back
		est += 500*time.Millisecond + seconds(msgs/400e3)
	case r.Scenario == "kafka-style" || r.Scenario == "kafka-style-sync":
		est += seconds(msgs / 2e6)
	}
	return est
}

// EstimateRuns is the expected wall time of runs one after another.
func EstimateRuns(runs []Run) time.Duration {
	var d time.Duration
	for _, r := range runs {
		d += r.Estimate()
	}
	return d
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
