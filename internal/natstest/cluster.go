// Package natstest runs clusters of embedded nats-servers on loopback for tests: N servers joined
// by routes in one process, each with its own global account and the same subject mappings (an
// *Account cannot be shared between servers' options: NewServer clears its mappings), and waits
// on what the servers report (routes up, interest propagated) rather than on time.
package natstest

import (
	"fmt"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// WaitTimeout bounds every wait of this package.
const WaitTimeout = 20 * time.Second

// Cluster is a running cluster of servers.
type Cluster struct {
	t       testing.TB
	Servers []*server.Server
	// Mappings are every server's global account mappings, source -> destination.
	Mappings map[string]string
	js       bool       // JetStream on (StartJetStreamCluster)
	routes   []*url.URL // every server's routes, with JetStream
	ports    []int      // the route ports, with JetStream
}

// StartCluster starts n servers named S0, S1... on 127.0.0.1 (random client and route ports), S1
// and later routed to S0, each with mappings in a global account of its own, and waits until every
// server has a route to every other. They are shut down when the test ends.
func StartCluster(t testing.TB, n int, mappings map[string]string) *Cluster {
	t.Helper()
	c := &Cluster{t: t, Mappings: mappings}
	for i := range n {
		c.Servers = append(c.Servers, c.start(i, nil))
	}
	c.WaitRoutes()
	return c
}

// start starts server i, routed to S0 unless it is S0; routes replaces that when set.
func (c *Cluster) start(i int, routes []*url.URL) *server.Server {
	c.t.Helper()
	acc := server.NewAccount(server.DEFAULT_GLOBAL_ACCOUNT)
	for src, dest := range c.Mappings {
		if err := acc.AddMapping(src, dest); err != nil {
			c.t.Fatalf("mapping %q -> %q: %v", src, dest, err)
		}
	}
	o := &server.Options{
		ServerName: fmt.Sprintf("S%d", i), Host: "127.0.0.1", Port: server.RANDOM_PORT,
		NoLog: true, NoSigs: true,
		Cluster:  server.ClusterOpts{Name: "natstest", Host: "127.0.0.1", Port: server.RANDOM_PORT},
		Accounts: []*server.Account{acc},
	}
	if c.js {
		o.JetStream, o.StoreDir, o.SyncAlways = true, c.t.TempDir(), true
		o.Cluster.Port = c.ports[i]
	}
	switch {
	case routes != nil:
		o.Routes = routes
	case i > 0:
		o.Routes = server.RoutesFromStr(fmt.Sprintf("nats://127.0.0.1:%d", c.Servers[0].ClusterAddr().Port))
	}
	s, err := server.NewServer(o)
	if err != nil {
		c.t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(WaitTimeout) {
		c.t.Fatalf("server S%d not ready", i)
	}
	c.t.Cleanup(s.Shutdown)
	return s
}

// URL is server i's client URL.
func (c *Cluster) URL(i int) string { return c.Servers[i].ClientURL() }

// Kill shuts server i down (its clients reconnect to the others if they know them).
func (c *Cluster) Kill(i int) {
	c.Servers[i].Shutdown()
	c.Servers[i].WaitForShutdown()
}

// Up lists the servers still running.
func (c *Cluster) Up() []*server.Server {
	var up []*server.Server
	for _, s := range c.Servers {
		if s.Running() {
			up = append(up, s)
		}
	}
	return up
}

// WaitRoutes waits until every running server has a route to every other running one.
func (c *Cluster) WaitRoutes() {
	c.t.Helper()
	up := c.Up()
	c.WaitFor("routes", func() bool {
		for _, s := range up {
			if s.NumRemotes() != len(up)-1 {
				return false
			}
		}
		return true
	})
}

// WaitInterest waits until every running server knows of a subscription matching each subject
// (interest crosses routes asynchronously: a message published on one server right after a
// subscription on another may find no one).
func (c *Cluster) WaitInterest(subjects ...string) {
	c.t.Helper()
	c.WaitFor(fmt.Sprintf("interest in %v", subjects), func() bool {
		for _, s := range c.Up() {
			for _, subj := range subjects {
				if !s.GlobalAccount().SubscriptionInterest(subj) {
					return false
				}
			}
		}
		return true
	})
}

// WaitNoInterest waits until no running server knows of a subscription matching subject.
func (c *Cluster) WaitNoInterest(subject string) {
	c.t.Helper()
	c.WaitFor("no interest in "+subject, func() bool {
		for _, s := range c.Up() {
			if s.GlobalAccount().SubscriptionInterest(subject) {
				return false
			}
		}
		return true
	})
}

// WaitFor checks cond every millisecond until it holds, for at most WaitTimeout. It is for server
// state that has no event to wait on (routes, interest); nothing else should poll.
func (c *Cluster) WaitFor(what string, cond func() bool) {
	c.t.Helper()
	WaitFor(c.t, what, cond)
}

// WaitFor is Cluster.WaitFor for servers outside a Cluster.
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(WaitTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline.C:
			t.Fatalf("natstest: %s: not reached within %v", what, WaitTimeout)
		}
	}
}

// StartJetStreamCluster starts n servers with JetStream (each with its own store directory and
// sync_interval: always, as replicated mode asks of its servers), routed to each other on
// ports picked beforehand (JetStream sizes its meta group from the configured routes), each with
// mappings in its own global account, and waits until the routes are up and the JetStream meta
// group has a leader that every server follows.
func StartJetStreamCluster(t testing.TB, n int, mappings map[string]string) *Cluster {
	t.Helper()
	c := &Cluster{t: t, Mappings: mappings, js: true}
	ports := make([]int, n)
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ports[i] = l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
	}
	var urls []string
	for _, p := range ports {
		urls = append(urls, fmt.Sprintf("nats://127.0.0.1:%d", p))
	}
	c.routes = server.RoutesFromStr(strings.Join(urls, ","))
	c.ports = ports
	for i := range n {
		c.Servers = append(c.Servers, c.start(i, c.routes))
	}
	c.WaitRoutes()
	c.WaitFor("a JetStream meta leader that sees every server", func() bool {
		leaders := 0
		for _, s := range c.Up() {
			if !s.JetStreamIsCurrent() {
				return false
			}
			// The leader places streams on the peers it has stats of: until it has every one, an
			// R3 stream may be refused ("no suitable peers for placement").
			if s.JetStreamIsLeader() {
				if len(s.JetStreamClusterPeers()) != n {
					return false
				}
				leaders++
			}
		}
		return leaders == 1
	})
	return c
}
