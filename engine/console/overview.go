package console

import (
	"net/http"

	"github.com/rocketstore/engine/engine/monitor"
)

// overview is GET /console/api/overview: the monitor's status (readiness and why, the store's
// offsets, disk and retention thresholds, files, syncs, ingress, groups) and the counts of the
// store's topics; the charts come from /console/api/samples.
func (c *Console) overview(w http.ResponseWriter, _ *http.Request) {
	out := struct {
		Status   *monitor.Status `json:"status,omitempty"`
		Topics   int             `json:"topics"`
		Queues   int             `json:"queues"`
		Actions  bool            `json:"actions"`
		Attached bool            `json:"attached"`
	}{Actions: c.opts.Actions}
	if f := c.statusFunc(); f != nil {
		st := f()
		out.Status = &st
	}
	if t := c.attached(); t != nil && t.Store != nil {
		out.Attached = true
		for _, ti := range t.Store.Topics() {
			out.Topics++
			out.Queues += len(ti.Queues)
		}
	}
	reply(w, out)
}
