package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/nats-io/nats.go"
)

// The console (README.md, "Console"), in a real browser against the engine binary: what was
// published shows on its pages, its searches are links, its charts move, and nothing changes
// state without the credentials and a confirmation. One browser for both engines.
func TestConsole(t *testing.T) {
	browser := startBrowser(t)
	shots := screenshotDir(t)
	t.Run("read-only", func(t *testing.T) { consoleReadOnly(t, browser, shots) })
	t.Run("actions", func(t *testing.T) { consoleActions(t, browser, shots) })
}

// rows is how many rows a table's body has (an empty table's placeholder aside).
func rows(id string) string {
	return fmt.Sprintf(`document.querySelectorAll('#%s tbody tr:not(:has(td.empty))').length`, id)
}

// iso is ms as an RFC 3339 time with milliseconds, as the console's links carry it.
func iso(ms int64) string { return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z07:00") }

// consoleReadOnly: an engine with the defaults (the console on 127.0.0.1, read-only) and real
// published data.
func consoleReadOnly(t *testing.T, browser context.Context, shots string) {
	e := startEngine(t, t.TempDir(), "--http", "127.0.0.1:0", "--topics", "device.*.temp")
	nc := connect(t, e.url)
	base := e.http + "/console/"
	api := consoleHTTP{t: t, base: e.http}

	// 60 topics (more than a page), orders with a key and a Nats-Msg-Id each, a declared
	// topic with two subjects, two batches on one topic for the time search.
	for i := range 60 {
		stored(t, nc, msg(fmt.Sprintf("fleet.%02d", i), "position"))
	}
	note := `<img src=x onerror="document.title='pwned'">`
	var orders []ack
	for i := range 3 {
		body := fmt.Sprintf(`{"order":42,"line":%d,"note":%q}`, i, note)
		orders = append(orders, stored(t, nc, msg("orders.eu", body, "Rmq-Keys", "order-42", "Nats-Msg-Id", fmt.Sprint("pub-42-", i), "Trace", "<b>t</b>")))
	}
	for _, s := range []string{"device.1.temp", "device.2.temp", "device.1.temp", "device.2.temp", "device.1.temp"} {
		stored(t, nc, msg(s, "21.5"))
	}
	var batchA, batchB, batchC []ack
	for i := range 4 {
		batchA = append(batchA, stored(t, nc, msg("timeline", fmt.Sprint("a", i))))
	}
	for i := range 5 {
		batchB = append(batchB, stored(t, nc, msg("timeline", fmt.Sprint("b", i))))
	}
	// Batch C is stored after B's last millisecond: a search that ignored its end would list it.
	for i := 0; len(batchC) < 3 || batchC[len(batchC)-1].StoreTimestamp <= batchB[len(batchB)-1].StoreTimestamp; i++ {
		if i == 10_000 {
			t.Fatal("10,000 messages stored within one millisecond")
		}
		batchC = append(batchC, stored(t, nc, msg("timeline", fmt.Sprint("c", i))))
	}
	waitReadable(t, nc, append(append(append(orders, batchA...), batchB...), batchC...)...)

	b := newTab(t, browser, nil)

	t.Run("overview chart moves while publishing", func(t *testing.T) {
		b.open(t, base, "overview")
		b.wait(t, `document.querySelector('#readiness') && document.querySelector('#readiness').textContent === 'ready'`, "ready")
		before := eval[string](t, b, `document.querySelector('#chart-messages').toDataURL()`)
		stop := publishLoad(t, nc, "load.chart")
		b.wait(t, `Number(document.querySelector('#chart-messages').dataset.last) > 0`, "a rate above 0 on the messages chart")
		// The rate can be above 0 already when the page opens (the batches above were stored a
		// moment before; seen in CI), so the drawing is awaited, not compared at once.
		b.wait(t, fmt.Sprintf(`document.querySelector('#chart-messages').toDataURL() !== %q`, before), "the messages chart to change while messages are stored")
		drawn := eval[string](t, b, `document.querySelector('#chart-messages').toDataURL()`)
		b.wait(t, fmt.Sprintf(`document.querySelector('#chart-messages').toDataURL() !== %q`, drawn), "the chart to move on")
		stop()
		b.screenshot(t, shots, "overview")
	})

	t.Run("topics list what was published", func(t *testing.T) {
		b.open(t, base+"topics", "topics")
		if n := eval[int](t, b, rows("topics-table")); n != 50 {
			t.Fatalf("%d topics on the first page, want 50 (a page)", n)
		}
		count := eval[string](t, b, `document.querySelector('#topics-count').textContent`)
		if !strings.HasPrefix(count, "64 topics") {
			t.Fatalf("count %q, want 64 topics (60 fleet, orders_eu, device, timeline, load_chart)", count)
		}
		for _, topic := range []string{"device", "fleet_00", "fleet_45"} {
			b.wait(t, fmt.Sprintf(`document.querySelector('#topics-table tr[data-topic=%q]')`, topic), "topic "+topic+" on page 1")
		}
		if !strings.Contains(eval[string](t, b, `document.querySelector('#patterns-table').textContent`), "device.*.temp") {
			t.Fatal("the declared pattern device.*.temp is not shown")
		}
		b.screenshot(t, shots, "topics")
		b.do(t, chromedp.Click(chromedp.CSS(`nav.pager a:last-child`)))
		b.wait(t, `location.search.includes('after=') && document.querySelector('#topics-table tr[data-topic="orders_eu"]')`, "orders_eu on the next page")
		b.wait(t, `document.querySelector('#topics-table tr[data-topic="timeline"]')`, "timeline on the next page")
		// Search: the form puts it in the URL.
		b.do(t, chromedp.SetValue(chromedp.ID("topic-q"), "orders"), chromedp.Click(chromedp.CSS(`form.search button[type=submit]`)))
		b.wait(t, `location.search === '?q=orders' && `+rows("topics-table")+` === 1 && document.querySelector('#topics-table tr[data-topic="orders_eu"]')`, "the search for orders")
	})

	t.Run("topic page", func(t *testing.T) {
		b.open(t, base+"topic?topic=orders_eu", "topic")
		// The three messages have one key: one queue (by its hash), offsets 0 to 3.
		if n := eval[int](t, b, rows("queues-table")); n != 1 {
			t.Fatalf("%d queues, want 1", n)
		}
		if cells := eval[[]string](t, b, `Array.from(document.querySelectorAll('#queues-table tbody td'), c => c.textContent)`); cells[1] != "0" || cells[2] != "3" || cells[3] != "3" {
			t.Fatalf("queue row %q: want min 0, max 3, 3 messages", cells)
		}
		b.screenshot(t, shots, "topic")
	})

	t.Run("search by key is a link", func(t *testing.T) {
		b.open(t, base+"messages", "messages")
		b.do(t, chromedp.SendKeys(chromedp.ID("search-topic"), "orders_eu"), chromedp.SendKeys(chromedp.ID("search-key"), "order-42"),
			chromedp.Click(chromedp.CSS(`form.search button[type=submit]`)))
		b.wait(t, `document.querySelector('#messages-table') && `+rows("messages-table")+` === 3`, "3 messages of key order-42")
		loc := eval[string](t, b, `location.href`)
		if u, _ := url.Parse(loc); u.Query().Get("topic") != "orders_eu" || u.Query().Get("key") != "order-42" {
			t.Fatalf("the search's URL is %s", loc)
		}
		for _, a := range orders {
			b.wait(t, fmt.Sprintf(`document.querySelector('#messages-table tr[data-msg-id=%q]')`, a.MsgID), "message "+a.MsgID)
		}
		b.screenshot(t, shots, "messages-key")
		// The link, opened afresh, is the same search.
		b.open(t, loc, "messages")
		if n := eval[int](t, b, rows("messages-table")); n != 3 {
			t.Fatalf("the shared link shows %d messages", n)
		}
		// By Nats-Msg-Id.
		b.open(t, base+"messages?topic=orders_eu&id=pub-42-1", "messages")
		b.wait(t, fmt.Sprintf(`%s === 1 && document.querySelector('#messages-table tr[data-msg-id=%q]')`, rows("messages-table"), orders[1].MsgID), "the message of pub-42-1")
	})

	t.Run("search by time is a link", func(t *testing.T) {
		begin, end := batchB[0].StoreTimestamp, batchB[len(batchB)-1].StoreTimestamp
		b.open(t, base+"messages?"+url.Values{"topic": {"timeline"}, "begin": {iso(begin)}, "end": {iso(end)}}.Encode(), "messages")
		var listed []string
		if err := json.Unmarshal([]byte(eval[string](t, b, `JSON.stringify(Array.from(document.querySelectorAll('#messages-table tr[data-msg-id]'), r => r.dataset.msgId))`)), &listed); err != nil {
			t.Fatal(err)
		}
		inRange := map[string]bool{}
		for _, a := range append(append(batchA, batchB...), batchC...) {
			if a.StoreTimestamp >= begin && a.StoreTimestamp <= end {
				inRange[a.MsgID] = true
			}
		}
		for _, id := range listed {
			if !inRange[id] {
				t.Fatalf("message %s listed, stored outside [%d, %d]", id, begin, end)
			}
		}
		for _, a := range batchB {
			if !strings.Contains(strings.Join(listed, " "), a.MsgID) {
				t.Fatalf("message %s of the range not listed (listed %v)", a.MsgID, listed)
			}
		}
		b.screenshot(t, shots, "messages-time")
		// The form shows the range to the millisecond: submitted again, it is the same search.
		b.do(t, chromedp.Click(chromedp.CSS(`form.search button[type=submit]`)))
		b.wait(t, fmt.Sprintf(`new URLSearchParams(location.search).get('begin') === %q && new URLSearchParams(location.search).get('end') === %q && %s === %d`,
			iso(begin), iso(end), rows("messages-table"), len(listed)), "the same search, from the form")
		// By subject within a declared topic.
		b.open(t, base+"messages?topic=device&subject=device.2.temp", "messages")
		if n := eval[int](t, b, rows("messages-table")); n != 2 {
			t.Fatalf("%d messages of device.2.temp, want 2", n)
		}
	})

	t.Run("a message's page shows its body", func(t *testing.T) {
		b.open(t, base+"messages?topic=orders_eu&key=order-42", "messages")
		b.do(t, chromedp.Click(chromedp.CSS(fmt.Sprintf(`#messages-table tr[data-msg-id=%q] a`, orders[0].MsgID))))
		b.wait(t, fmt.Sprintf(`location.pathname === '/console/message' && document.querySelector('#message-id') && document.querySelector('#message-id').textContent === %q`, orders[0].MsgID), "the message page")
		body := eval[string](t, b, `document.querySelector('#body-json').textContent`)
		if !strings.Contains(body, `"order": 42`) || !strings.Contains(body, "<img src=x") {
			t.Fatalf("the JSON body shows %q", body)
		}
		// What the message holds is text in the page, never markup.
		if n := eval[int](t, b, `document.querySelectorAll('#main img, #main b').length`); n != 0 || eval[string](t, b, `document.title`) == "pwned" {
			t.Fatalf("the message's markup became %d elements of the page", n)
		}
		pub := eval[string](t, b, `document.querySelector('#nats-pub').textContent`)
		if !strings.HasPrefix(pub, "nats pub 'orders.eu' '{\"order\":42") || !strings.Contains(pub, "-H 'Rmq-Keys:order-42'") || !strings.Contains(pub, "-H 'Trace:<b>t</b>'") {
			t.Fatalf("nats pub command %q", pub)
		}
		b.screenshot(t, shots, "message")
		b.do(t, chromedp.Click(chromedp.ID("tab-hex")))
		if hex := eval[string](t, b, `document.querySelector('#body-hex').textContent`); !strings.HasPrefix(hex, "00000000  7b 22 6f 72") {
			t.Fatalf("hex view %q", hex[:min(len(hex), 40)])
		}
	})

	t.Run("groups page shows a group", func(t *testing.T) {
		member := startProc(t, procOpts{args: []string{"consume", "--nats", e.url, "--group", "console-g", "--topic", "orders_eu", "--client-id", "browser-test"}})
		waitFor(t, "the member of console-g to join", func() bool {
			var p struct {
				Groups []struct {
					Group   string
					Members int
				}
			}
			api.get("/console/api/groups?q=console-g", &p)
			return len(p.Groups) == 1 && p.Groups[0].Members == 1
		})
		b.open(t, base+"groups", "groups")
		b.wait(t, `document.querySelector('#groups-table tr[data-group="console-g"]').cells[2].textContent === '1'`, "group console-g with its member")
		b.screenshot(t, shots, "groups")
		b.open(t, base+"group?topic=orders_eu&group=console-g", "group")
		b.wait(t, rows("members-table")+` === 1 && document.querySelector('#members-table').textContent.includes('browser-test')`, "its member")
		owned := eval[int](t, b, `Array.from(document.querySelectorAll('#group-queues-table tbody tr')).filter(r => r.cells[1].textContent !== '–' && r.cells[2].textContent !== '–').length`)
		if owned != 4 {
			t.Fatalf("%d queues with an owner and an epoch, want 4", owned)
		}
		if eval[bool](t, b, `!document.querySelector('#read-only')`) {
			t.Fatal("no read-only note on a console without actions")
		}
		b.screenshot(t, shots, "group")
		member.send(syscall.SIGTERM)
		member.wait()
		// The read-only console refuses a change, whatever the request.
		code, body := api.call(http.MethodPost, "/console/api/group/delete", `{"topic":"orders_eu","group":"console-g"}`,
			map[string]string{"Content-Type": "application/json", "Origin": e.http})
		if code != http.StatusForbidden || !strings.Contains(body, "read-only") {
			t.Fatalf("delete on a read-only console: %d %s", code, body)
		}
	})

	t.Run("narrow screen", func(t *testing.T) {
		n := newTab(t, browser, nil)
		n.do(t, chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile))
		for _, v := range []struct{ path, view, shot string }{
			{"", "overview", "narrow-overview"},
			{"topics", "topics", ""},
			{"group?topic=orders_eu&group=console-g", "group", ""},
			{"messages?topic=orders_eu&key=order-42", "messages", "narrow-messages"},
			{"message?id=" + orders[0].MsgID, "message", ""},
		} {
			n.open(t, base+v.path, v.view)
			if w := eval[[]int](t, n, `[document.documentElement.scrollWidth, window.innerWidth]`); w[0] > w[1] {
				t.Fatalf("%s on a 390 px screen is %d px wide", v.path, w[0])
			}
			if v.shot != "" {
				n.screenshot(t, shots, v.shot)
			}
		}
	})
}

// waitFor polls cond, observing the engine from outside, until it holds or the wait times out.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s", waitTimeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// publishLoad publishes acked messages on subject until stop is called (at most 100,000).
func publishLoad(t *testing.T, nc *nats.Conn, subject string) (stop func()) {
	t.Helper()
	quit, done := make(chan struct{}), make(chan error, 1)
	go func() {
		for i := range 100_000 {
			select {
			case <-quit:
				done <- nil
				return
			default:
			}
			if _, err := nc.Request(subject, []byte(fmt.Sprint("load ", i)), waitTimeout); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			close(quit)
			if err := <-done; err != nil {
				t.Errorf("publishing: %v", err)
			}
		})
	}
}

// consoleActions: an engine whose console has a password and actions: nothing reads without
// the credentials, nothing changes without them, this origin and the page's token, and an action
// in the page goes ahead only once confirmed.
func consoleActions(t *testing.T, browser context.Context, shots string) {
	const password = "s3cret pass"
	e := startEngine(t, t.TempDir(), "--http", "127.0.0.1:0", "--console-password", password, "--console-actions")
	nc := connect(t, e.url)
	base := e.http + "/console/"
	var acks []ack
	for i := range 6 {
		acks = append(acks, stored(t, nc, msg("orders.eu", fmt.Sprint("order ", i))))
	}
	waitReadable(t, nc, acks...)
	mustCLI(t, "consume", "--nats", e.url, "--group", "billing", "--topic", "orders_eu", "--count", "6")

	anon := consoleHTTP{t: t, base: e.http}
	admin := consoleHTTP{t: t, base: e.http, auth: basicAuth("admin", password)}
	t.Run("refused without credentials", func(t *testing.T) {
		for _, path := range []string{"/console/", "/console/api/topics", "/console/api/group?topic=orders_eu&group=billing"} {
			if code, _ := anon.call(http.MethodGet, path, "", nil); code != http.StatusUnauthorized {
				t.Fatalf("GET %s without credentials: %d, want 401", path, code)
			}
		}
		json := map[string]string{"Content-Type": "application/json", "Origin": e.http}
		if code, body := anon.call(http.MethodPost, "/console/api/group/delete", `{"topic":"orders_eu","group":"billing"}`, json); code != http.StatusUnauthorized {
			t.Fatalf("delete without credentials: %d %s, want 401", code, body)
		}
		// With them, but not from the page: no session token, or another site.
		if code, body := admin.call(http.MethodPost, "/console/api/group/delete", `{"topic":"orders_eu","group":"billing"}`, json); code != http.StatusForbidden {
			t.Fatalf("delete without the page's token: %d %s, want 403", code, body)
		}
		json["Origin"] = "http://evil.example"
		if code, body := admin.call(http.MethodPost, "/console/api/group/delete", `{"topic":"orders_eu","group":"billing"}`, json); code != http.StatusForbidden {
			t.Fatalf("delete from another origin: %d %s, want 403", code, body)
		}
		var g struct {
			Queues []struct{ Committed int64 }
		}
		admin.get("/console/api/group?topic=orders_eu&group=billing", &g)
		if len(g.Queues) == 0 {
			t.Fatal("the group is gone after refused requests")
		}
		// The monitor's own endpoints stay as they were, without credentials.
		for _, path := range []string{"/metrics", "/healthz", "/readyz", "/status"} {
			if code, body := anon.call(http.MethodGet, path, "", nil); code != http.StatusOK {
				t.Fatalf("GET %s without credentials: %d %.200s", path, code, body)
			}
		}
	})

	b := newTab(t, browser, map[string]string{"Authorization": basicAuth("admin", password)})
	t.Run("reset and delete, confirmed in the page", func(t *testing.T) {
		b.open(t, base+"group?topic=orders_eu&group=billing", "group")
		b.wait(t, `document.querySelector('#who').dataset.actions === 'on' && document.querySelector('#reset-button')`, "the actions")
		// An offset left empty is refused in the page, with no question asked (Number('') is 0:
		// it used to ask to reset to "offset " and reset to 0).
		b.do(t, chromedp.SetValue(chromedp.ID("reset-to"), "offset"), chromedp.SetValue(chromedp.ID("reset-offset"), ""),
			chromedp.Click(chromedp.ID("reset-button")))
		b.wait(t, `document.querySelector('#action-result').textContent.startsWith('Give an offset') && !document.querySelector('#confirm').open`,
			"the empty offset refused without a question")
		// Reset to the earliest: the dialog asks for the group's name before it goes ahead.
		b.do(t, chromedp.SetValue(chromedp.ID("reset-to"), "earliest"), chromedp.Click(chromedp.ID("reset-button")))
		b.wait(t, `document.querySelector('#confirm').open && document.querySelector('#confirm-ok').disabled`, "the confirmation, its button off")
		b.do(t, chromedp.SendKeys(chromedp.ID("confirm-input"), "billing"))
		b.wait(t, `!document.querySelector('#confirm-ok').disabled`, "the button on once the name is typed")
		b.screenshot(t, shots, "group-confirm")
		b.do(t, chromedp.Click(chromedp.ID("confirm-ok")))
		b.wait(t, `document.querySelector('#action-result').textContent.startsWith('Reset:')`, "the reset's result")
		var g struct {
			LagMessages int64 `json:"lag_messages"`
			Queues      []struct{ Committed int64 }
		}
		admin.get("/console/api/group?topic=orders_eu&group=billing", &g)
		for _, q := range g.Queues {
			if q.Committed != 0 {
				t.Fatalf("after the reset to the earliest: %+v", g)
			}
		}
		if g.LagMessages != 6 {
			t.Fatalf("lag %d after the reset, want the 6 messages", g.LagMessages)
		}
		// Delete, cancelled: nothing happens.
		b.do(t, chromedp.Click(chromedp.ID("delete-button")))
		b.wait(t, `document.querySelector('#confirm').open`, "the confirmation")
		b.do(t, chromedp.Click(chromedp.ID("confirm-cancel")))
		b.wait(t, `!document.querySelector('#confirm').open`, "the dialog closed")
		admin.get("/console/api/group?topic=orders_eu&group=billing", &g)
		// Delete, confirmed.
		b.do(t, chromedp.Click(chromedp.ID("delete-button")))
		b.wait(t, `document.querySelector('#confirm').open`, "the confirmation")
		b.do(t, chromedp.SendKeys(chromedp.ID("confirm-input"), "billing"))
		// A click before the page has taken the name hits a disabled button (seen in CI: the
		// deletion never came): wait for the button, as a person would.
		b.wait(t, `!document.querySelector('#confirm-ok').disabled`, "the button on once the name is typed")
		b.do(t, chromedp.Click(chromedp.ID("confirm-ok")))
		b.wait(t, `document.querySelector('#action-result') && document.querySelector('#action-result').textContent === 'Deleted.'`, "the deletion")
		if code, body := admin.call(http.MethodGet, "/console/api/group?topic=orders_eu&group=billing", "", nil); code != http.StatusNotFound {
			t.Fatalf("the group after its deletion: %d %s", code, body)
		}
	})
}

// TestConsoleOff: --no-console serves no console; the monitor's endpoints stay.
func TestConsoleOff(t *testing.T) {
	e := startEngine(t, t.TempDir(), "--http", "127.0.0.1:0", "--no-console")
	c := consoleHTTP{t: t, base: e.http}
	for path, want := range map[string]int{"/console/": 404, "/console/api/topics": 404, "/metrics": 200, "/status": 200} {
		if code, _ := c.call(http.MethodGet, path, "", nil); code != want {
			t.Errorf("GET %s with --no-console: %d, want %d", path, code, want)
		}
	}
}

// consoleHTTP is a client of the console's API, as curl is.
type consoleHTTP struct {
	t    *testing.T
	base string // http://127.0.0.1:port
	auth string // the Authorization header, "" for none
}

func (c consoleHTTP) call(method, path, body string, hdr map[string]string) (int, string) {
	c.t.Helper()
	req, err := http.NewRequest(method, c.base+path, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	if c.auth != "" {
		req.Header.Set("Authorization", c.auth)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := (&http.Client{Timeout: waitTimeout}).Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

func (c consoleHTTP) get(path string, out any) {
	c.t.Helper()
	code, body := c.call(http.MethodGet, path, "", nil)
	if code != http.StatusOK {
		c.t.Fatalf("GET %s: %d %s", path, code, body)
	}
	if err := json.Unmarshal([]byte(body), out); err != nil {
		c.t.Fatalf("GET %s: %v in %s", path, err, body)
	}
}
