package e2e

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
)

// An external NATS server for the tests of `--server` (a real nats-server, as a user runs one
// beside the engine) and a proxy in front of it that can stop passing what the server sends.

// startNATS runs a nats-server on 127.0.0.1:port (0: a free one) with a max payload that takes
// the engine's default body limit, changed by opts.
func startNATS(t *testing.T, port int, opts ...func(*natsserver.Options)) *natsserver.Server {
	t.Helper()
	o := &natsserver.Options{Host: "127.0.0.1", Port: port, MaxPayload: 4<<20 + 64<<10, NoSigs: true, NoLog: true}
	if port == 0 {
		o.Port = natsserver.RANDOM_PORT
	}
	for _, f := range opts {
		f(o)
	}
	ns, err := natsserver.NewServer(o)
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(waitTimeout) {
		t.Fatal("nats-server not ready")
	}
	t.Cleanup(ns.Shutdown)
	return ns
}

// stallProxy forwards TCP connections to a NATS server and, once stalled, holds everything the
// server sends: a client behind it then never gets the PONG of a flush, so its drain cannot end
// before nats.go gives up (10 s).
type stallProxy struct {
	ln      net.Listener
	target  string
	stalled atomic.Bool
	quit    chan struct{}
	wg      sync.WaitGroup
	mu      sync.Mutex
	conns   []net.Conn
}

func newStallProxy(t *testing.T, target string) *stallProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &stallProxy{ln: ln, target: target, quit: make(chan struct{})}
	p.wg.Go(p.accept)
	t.Cleanup(func() {
		ln.Close()
		close(p.quit)
		p.mu.Lock()
		for _, c := range p.conns {
			c.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
	return p
}

func (p *stallProxy) url() string { return "nats://" + p.ln.Addr().String() }

func (p *stallProxy) accept() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return // closed by the cleanup
		}
		server, err := net.DialTimeout("tcp", p.target, waitTimeout)
		if err != nil {
			client.Close()
			continue
		}
		p.mu.Lock()
		select {
		case <-p.quit:
			p.mu.Unlock()
			client.Close()
			server.Close()
			return
		default:
		}
		p.conns = append(p.conns, client, server)
		p.mu.Unlock()
		p.wg.Go(func() { // client -> server, never held
			_, _ = io.Copy(server, client)
			server.Close()
		})
		p.wg.Go(func() { // server -> client, held once stalled
			buf := make([]byte, 32<<10)
			for {
				n, err := server.Read(buf)
				if n > 0 && p.stalled.Load() {
					<-p.quit // held until the end of the test
					return
				}
				if n > 0 {
					if _, err := client.Write(buf[:n]); err != nil {
						return
					}
				}
				if err != nil {
					client.Close()
					return
				}
			}
		})
	}
}

// clientURL is the server's address for clients.
func clientURL(ns *natsserver.Server) string { return ns.ClientURL() }

// untilDeadline polls cond (something outside this process) until it holds or the deadline
// passes; it is the only kind of polling the tests do.
func untilDeadline(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, waitTimeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
