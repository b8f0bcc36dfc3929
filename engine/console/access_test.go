package console

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

func TestLoopbackAddr(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:8222": true, "127.1.2.3:80": true, "[::1]:8222": true, "localhost:8222": true, "LOCALHOST:1": true,
		":8222": false, "0.0.0.0:8222": false, "[::]:8222": false, "10.0.0.5:8222": false, "myhost:8222": false,
		"192.168.1.1:80": false, "": false,
	} {
		if got := LoopbackAddr(addr); got != want {
			t.Errorf("LoopbackAddr(%q) = %v, want %v", addr, got, want)
		}
	}
}

func errorOf(t *testing.T, body string) string {
	t.Helper()
	var e struct {
		Error struct {
			Code        int
			Description string
		}
	}
	if err := json.Unmarshal([]byte(body), &e); err != nil || e.Error.Code == 0 {
		t.Fatalf("not an error answer: %s", body)
	}
	return e.Error.Description
}

// TestAccessLoopbackReadOnly: on loopback without a password the console reads, refuses any
// other Host (DNS rebinding) and every request that changes state; every answer forbids framing
// and inline scripts.
func TestAccessLoopbackReadOnly(t *testing.T) {
	c := newConsole(t, Options{}, Target{})
	for _, path := range []string{"/console/", "/console/topics", "/console/api/session", "/console/assets/app.js"} {
		w := c.do(request{path: path})
		if w.Code != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, w.Code, w.Body)
		}
		if csp := w.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "frame-ancestors 'none'") {
			t.Fatalf("GET %s: Content-Security-Policy %q", path, csp)
		}
		if w.Header().Get("X-Frame-Options") != "DENY" {
			t.Fatalf("GET %s: framing allowed", path)
		}
	}
	for _, host := range []string{"evil.example", "evil.example:8222", "10.0.0.1:8222"} {
		w := c.do(request{path: "/console/api/session", header: http.Header{"Host": {host}}})
		if w.Code != http.StatusForbidden || !strings.Contains(errorOf(t, w.Body.String()), "refused") {
			t.Fatalf("Host %s: %d %s", host, w.Code, w.Body)
		}
	}
	for _, host := range []string{"localhost:8222", "[::1]:8222", "127.0.0.1"} {
		if w := c.do(request{path: "/console/api/session", header: http.Header{"Host": {host}}}); w.Code != http.StatusOK {
			t.Fatalf("Host %s: %d %s", host, w.Code, w.Body)
		}
	}
	w := c.do(request{method: http.MethodPost, path: "/console/api/group/delete", body: `{"topic":"T","group":"g"}`,
		header: http.Header{"Content-Type": {"application/json"}, "Origin": {"http://127.0.0.1:8222"}}})
	if w.Code != http.StatusForbidden || !strings.Contains(errorOf(t, w.Body.String()), "read-only") {
		t.Fatalf("POST without actions: %d %s", w.Code, w.Body)
	}
	if _, err := New(Options{Addr: "127.0.0.1:1", Actions: true}); err == nil {
		t.Fatal("actions without a password: accepted")
	}
}

// TestAccessNotLoopbackNeedsPassword: on another address without a password every request is
// refused and says what to set.
func TestAccessNotLoopbackNeedsPassword(t *testing.T) {
	for _, addr := range []string{":8222", "0.0.0.0:8222", "10.1.2.3:8222"} {
		c := newConsole(t, Options{Addr: addr}, Target{})
		if c.RequiresCredentials() != true {
			t.Fatalf("%s: no credentials required", addr)
		}
		for _, path := range []string{"/console/", "/console/api/topics", "/console/assets/app.js"} {
			w := c.do(request{path: path})
			if w.Code != http.StatusForbidden || !strings.Contains(errorOf(t, w.Body.String()), "console_password") {
				t.Fatalf("%s GET %s: %d %s", addr, path, w.Code, w.Body)
			}
		}
	}
}

// session starts a session as the page does: the cookie and the token.
func session(t *testing.T, c *Console, auth http.Header) (cookie, token string) {
	t.Helper()
	w := c.do(request{path: "/console/api/session", header: auth})
	if w.Code != http.StatusOK {
		t.Fatalf("session: %d %s", w.Code, w.Body)
	}
	var s struct{ Token string }
	if err := json.Unmarshal(w.Body.Bytes(), &s); err != nil || len(s.Token) != 64 {
		t.Fatalf("session %s: %v", w.Body, err)
	}
	ck := w.Result().Cookies()
	if len(ck) != 1 || ck[0].Name != sessionCookie || !ck[0].HttpOnly || ck[0].SameSite != http.SameSiteStrictMode {
		t.Fatalf("session cookie %+v", ck)
	}
	return ck[0].Name + "=" + ck[0].Value, s.Token
}

// TestAccessPasswordAndActions: with a password every request needs it (401 otherwise), and a
// request that changes state also needs actions on, this origin, and its session's token.
func TestAccessPasswordAndActions(t *testing.T) {
	c := newConsole(t, Options{Password: "s3cret", Actions: true}, Target{})
	good := http.Header{"Authorization": {basic("admin", "s3cret")}}
	for _, h := range []http.Header{nil, {"Authorization": {basic("admin", "wrong")}}, {"Authorization": {basic("root", "s3cret")}}} {
		w := c.do(request{path: "/console/api/topics", header: h})
		if w.Code != http.StatusUnauthorized || !strings.HasPrefix(w.Header().Get("WWW-Authenticate"), "Basic ") {
			t.Fatalf("GET with %v: %d %s", h, w.Code, w.Body)
		}
	}
	if w := c.do(request{path: "/console/", header: good}); w.Code != http.StatusOK {
		t.Fatalf("GET with the credentials: %d", w.Code)
	}
	cookie, token := session(t, c, good)
	_, other := session(t, c, good) // another session's token
	post := func(mod func(h http.Header)) (int, string) {
		h := http.Header{"Authorization": {basic("admin", "s3cret")}, "Content-Type": {"application/json"},
			"Origin": {"http://127.0.0.1:8222"}, "Cookie": {cookie}, tokenHeader: {token}, "Sec-Fetch-Site": {"same-origin"}}
		mod(h)
		w := c.do(request{method: http.MethodPost, path: "/console/api/group/delete", body: `{"topic":"T","group":"g"}`, header: h})
		return w.Code, w.Body.String()
	}
	for _, c := range []struct {
		why  string
		mod  func(http.Header)
		code int
		says string
	}{
		{"no credentials", func(h http.Header) { h.Del("Authorization") }, 401, "credentials"},
		{"wrong password", func(h http.Header) { h.Set("Authorization", basic("admin", "x")) }, 401, "credentials"},
		{"no Origin", func(h http.Header) { h.Del("Origin") }, 403, "cross-origin"},
		{"another Origin", func(h http.Header) { h.Set("Origin", "http://evil.example") }, 403, "cross-origin"},
		{"cross-site fetch", func(h http.Header) { h.Set("Sec-Fetch-Site", "cross-site") }, 403, "cross-site"},
		{"a form, not JSON", func(h http.Header) { h.Set("Content-Type", "application/x-www-form-urlencoded") }, 415, "JSON"},
		{"no session", func(h http.Header) { h.Del("Cookie") }, 403, "session"},
		{"no token", func(h http.Header) { h.Del(tokenHeader) }, 403, tokenHeader},
		{"another session's token", func(h http.Header) { h.Set(tokenHeader, other) }, 403, tokenHeader},
	} {
		code, body := post(c.mod)
		if code != c.code || !strings.Contains(errorOf(t, body), c.says) {
			t.Errorf("%s: %d %s, want %d saying %q", c.why, code, body, c.code, c.says)
		}
	}
	// Everything in order: past the checks, to the handler (whose engine serves no groups).
	if code, body := post(func(http.Header) {}); code != http.StatusNotFound || !strings.Contains(body, "no consumer groups") {
		t.Fatalf("a proper request: %d %s", code, body)
	}
}

func basic(user, pass string) string {
	r, _ := http.NewRequest(http.MethodGet, "/", nil)
	r.SetBasicAuth(user, pass)
	return r.Header.Get("Authorization")
}
