package console

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketstore/engine/engine"
	"github.com/rocketstore/engine/internal/vfs"
)

// Helpers of the console's tests: a real engine on a temporary store (with a clock the test
// moves, so that store times are known), and requests to a console's handler.

// clock is a store clock the test sets; every reading returns the time set.
type clock struct{ ms atomic.Int64 }

func newClock() *clock {
	c := &clock{}
	c.ms.Store(1_760_000_000_000)
	return c
}

func (c *clock) now() time.Time   { return time.UnixMilli(c.ms.Load()) }
func (c *clock) advance(ms int64) { c.ms.Add(ms) }

func testOptions(t testing.TB, clk *clock) engine.Options {
	o := engine.Options{
		Dir:               t.TempDir(),
		Logger:            zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel),
		CommitLogFileSize: 4 << 20,
		ConsumeQueueUnits: 200,
		IndexSlots:        4096,
		IndexEntries:      40_000,
		NoRetention:       true,
		FS:                vfs.NewMem(), // thousands of topics cost no disk syncs
	}
	if clk != nil {
		o.Now = clk.now
	}
	return o
}

// openEngine opens an engine (no NATS) closed at the end of the test.
func openEngine(t testing.TB, clk *clock) *engine.Engine {
	t.Helper()
	e, err := engine.Open(testOptions(t, clk))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := e.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return e
}

// serveEngine serves an engine with an embedded nats-server on a free loopback port (consumer
// groups need the read API).
func serveEngine(t testing.TB, clk *clock) *engine.Server {
	t.Helper()
	srv, err := engine.Serve(testOptions(t, clk), engine.NATSOptions{Listen: "127.0.0.1:-1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Shutdown(); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	return srv
}

// put stores msgs as one batch (one store time) and waits until they are readable.
func put(t testing.TB, e *engine.Engine, msgs ...engine.Message) []engine.Result {
	t.Helper()
	res, err := e.Put(context.Background(), msgs...)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("put %s: %v", r.Topic, r.Err)
		}
	}
	if err := e.WaitDispatched(context.Background(), e.Offsets().Written); err != nil {
		t.Fatal(err)
	}
	return res
}

// newConsole makes a console on 127.0.0.1 showing e.
func newConsole(t testing.TB, opts Options, target Target) *Console {
	t.Helper()
	if opts.Addr == "" {
		opts.Addr = "127.0.0.1:8222"
	}
	c, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	c.Attach(target)
	return c
}

// request is one request to a console's handler, for 127.0.0.1.
type request struct {
	method, path string
	params       url.Values
	body         string
	header       http.Header
}

func (c *Console) do(r request) *httptest.ResponseRecorder {
	target := r.path
	if len(r.params) > 0 {
		target += "?" + r.params.Encode()
	}
	req := httptest.NewRequest(cmpOr(r.method, http.MethodGet), "http://127.0.0.1:8222"+target, strings.NewReader(r.body))
	for k, vs := range r.header {
		if k == "Host" {
			req.Host = vs[0]
			continue
		}
		req.Header[k] = vs
	}
	w := httptest.NewRecorder()
	c.ServeHTTP(w, req)
	return w
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// getJSON GETs path and decodes a 200 answer into out.
func getJSON(t testing.TB, c *Console, path string, params url.Values, out any) {
	t.Helper()
	w := c.do(request{path: path, params: params})
	if w.Code != http.StatusOK {
		t.Fatalf("GET %s?%s: %d %s", path, params.Encode(), w.Code, w.Body.String())
	}
	if err := json.Unmarshal(w.Body.Bytes(), out); err != nil {
		t.Fatalf("GET %s: %v in %s", path, err, w.Body.String())
	}
}

// page is a list answer: the items as raw JSON and the cursor of the next page.
type page struct {
	Total    int               `json:"total"`
	Topics   []json.RawMessage `json:"topics"`
	Groups   []json.RawMessage `json:"groups"`
	Messages []SummaryJSON     `json:"messages"`
	Next     string            `json:"next"`
	Mode     string            `json:"mode"`
}

func vals(kv ...string) url.Values {
	v := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		v.Set(kv[i], kv[i+1])
	}
	return v
}

func name(i int) string { return fmt.Sprintf("t%05d", i) }
