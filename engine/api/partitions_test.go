package api_test

import (
	"fmt"
	"testing"

	"github.com/rocketstore/engine/engine/api"
	"github.com/rocketstore/engine/internal/wire"
	"github.com/rocketstore/engine/stages/ingress/route"
)

// TestPartitionOfAgrees holds the client's partition function to the engine's (which a test in
// stages/ingress holds to nats-server's mapping).
func TestPartitionOfAgrees(t *testing.T) {
	for _, count := range []int{1, 7, 64, 1024} {
		for i := range 2000 {
			key := fmt.Sprintf("key-%d-\xff%d", i, i*31)
			if a, b := api.PartitionOf(key, count), route.PartitionOf(key, count); a != b {
				t.Fatalf("%q mod %d: client %d, engine %d", key, count, a, b)
			}
		}
	}
	if got := api.PartitionSubject("", 7, api.EndpointGet); got != "$RS.API.p.7.get" {
		t.Fatalf("subject %q", got)
	}
}

// TestPublishingCodes: the codes the read API and publishing share are the same numbers.
func TestPublishingCodes(t *testing.T) {
	if api.CodeInternal != wire.CodeInternal || api.CodeUnavailable != wire.CodeUnavailable || api.CodeBadRequest != api.CodeInvalid {
		t.Fatalf("read API codes %d/%d/%d, publishing %d/%d/%d", api.CodeInternal, api.CodeUnavailable, api.CodeBadRequest,
			wire.CodeInternal, wire.CodeUnavailable, api.CodeInvalid)
	}
}
