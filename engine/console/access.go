package console

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// Who may do what (README.md, "Console"; docs/CONFIG.md):
//
//   - Served on a loopback address without a password, the console is open to the local
//     machine, read-only. Requests must name a loopback host (127.0.0.1, ::1, localhost) in
//     their Host header: a page of another site whose name was rebound to 127.0.0.1 (DNS
//     rebinding) is refused, since the browser would send its own name.
//   - With a password, every request needs it (HTTP basic authentication; 401 without). On any
//     other address a password is needed: without one, every request is refused (403) and the
//     monitor's other endpoints go on as before.
//   - A request that changes state needs, besides the credentials: Actions enabled (403
//     otherwise: read-only), an Origin of this host (403 for a cross-site request), and the
//     token of its session in X-Console-Token (403 without): the session is a random cookie
//     (HttpOnly, SameSite=Strict), its token an HMAC of it under a key of this process, handed
//     out by /console/api/session, which only a page of this origin can read.
//
// Every answer forbids framing and inline scripts (Content-Security-Policy), so that neither a
// stored message nor another site can make the page act.

// Names of the session cookie and of the header that carries the token.
const (
	sessionCookie = "rs_console"
	tokenHeader   = "X-Console-Token"
)

// contentSecurity allows the console's own files and requests only: no inline script, no other
// origin, no framing.
const contentSecurity = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

type access struct {
	user, password string
	actions        bool
	// loopback: the console's address is a loopback one.
	loopback bool
	key      [32]byte // signs the sessions' tokens
}

func newAccess(opts Options) (*access, error) {
	a := &access{user: opts.User, password: opts.Password, actions: opts.Actions, loopback: LoopbackAddr(opts.Addr)}
	if _, err := rand.Read(a.key[:]); err != nil {
		return nil, fmt.Errorf("console: %w", err)
	}
	return a, nil
}

// LoopbackAddr says whether a host:port listens on loopback only: 127.0.0.0/8, ::1 or localhost.
// An empty host (every interface) or a name other than localhost is not.
func LoopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	return loopbackHost(host)
}

func loopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(strings.Trim(host, "[]"))
	return err == nil && ip.IsLoopback()
}

// wrap applies the rules above to every request, then h.
func (a *access) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hdr := w.Header()
		hdr.Set("Content-Security-Policy", contentSecurity)
		hdr.Set("X-Frame-Options", "DENY")
		hdr.Set("X-Content-Type-Options", "nosniff")
		hdr.Set("Referrer-Policy", "no-referrer")
		hdr.Set("Cache-Control", "no-store")
		if code, why := a.check(r); code != 0 {
			if code == http.StatusUnauthorized {
				hdr.Set("WWW-Authenticate", `Basic realm="rocketstore console", charset="UTF-8"`)
			}
			fail(w, code, why)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// check returns 0, or the code and the reason a request is refused.
func (a *access) check(r *http.Request) (int, string) {
	switch {
	case a.password == "" && !a.loopback:
		return http.StatusForbidden, "the console is served on an address that is not loopback and has no password: " +
			"set console_password (--console-password) to use it, or serve --http on 127.0.0.1"
	case a.password == "":
		host := r.Host
		if h, _, err := net.SplitHostPort(r.Host); err == nil {
			host = h
		}
		if !loopbackHost(host) {
			return http.StatusForbidden, fmt.Sprintf("host %q refused: without a password the console answers only "+
				"requests for 127.0.0.1, ::1 or localhost", r.Host)
		}
	case !a.authorized(r):
		return http.StatusUnauthorized, "the console needs credentials (HTTP basic authentication: console_user and console_password)"
	}
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return 0, ""
	}
	return a.checkChange(r)
}

// checkChange checks a request that changes state, once its credentials are checked.
func (a *access) checkChange(r *http.Request) (int, string) {
	if !a.actions {
		return http.StatusForbidden, "the console is read-only: set console_actions (--console-actions) to allow resetting and deleting groups"
	}
	if a.password == "" {
		return http.StatusUnauthorized, "a request that changes state needs credentials: set console_password"
	}
	origin := r.Header.Get("Origin")
	if origin != "http://"+r.Host && origin != "https://"+r.Host {
		return http.StatusForbidden, fmt.Sprintf("cross-origin request refused: Origin %q is not this console's", origin)
	}
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" {
		return http.StatusForbidden, "cross-site request refused (Sec-Fetch-Site: " + site + ")"
	}
	if !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		return http.StatusUnsupportedMediaType, "a request that changes state is JSON (Content-Type: application/json)"
	}
	c, err := r.Cookie(sessionCookie)
	if err != nil || !validSession(c.Value) {
		return http.StatusForbidden, "no console session: load the page again"
	}
	want := a.token(c.Value, a.userOf(r))
	if got := r.Header.Get(tokenHeader); subtle.ConstantTimeCompare([]byte(got), []byte(want)) != 1 {
		return http.StatusForbidden, "missing or wrong " + tokenHeader + ": load the page again"
	}
	return 0, ""
}

// authorized checks the basic credentials, in constant time.
func (a *access) authorized(r *http.Request) bool {
	user, pass, ok := r.BasicAuth()
	if !ok {
		return false
	}
	hu, hp := sha256.Sum256([]byte(user)), sha256.Sum256([]byte(pass))
	wu, wp := sha256.Sum256([]byte(a.user)), sha256.Sum256([]byte(a.password))
	return subtle.ConstantTimeCompare(hu[:], wu[:])&subtle.ConstantTimeCompare(hp[:], wp[:]) == 1
}

// userOf names who sent r: the basic user, or "" when there is no password.
func (a *access) userOf(r *http.Request) string {
	if a.password == "" {
		return ""
	}
	u, _, _ := r.BasicAuth()
	return u
}

// session returns the token of r's session, starting a session (a cookie) if it has none.
func (a *access) session(w http.ResponseWriter, r *http.Request) string {
	id := ""
	if c, err := r.Cookie(sessionCookie); err == nil && validSession(c.Value) {
		id = c.Value
	} else {
		var b [16]byte
		_, _ = rand.Read(b[:]) // never fails (crypto/rand)
		id = hex.EncodeToString(b[:])
		http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: id, Path: "/console/", HttpOnly: true,
			SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	}
	return a.token(id, a.userOf(r))
}

// token is the session's token: an HMAC of its id and user under the process' key.
func (a *access) token(id, user string) string {
	m := hmac.New(sha256.New, a.key[:])
	m.Write([]byte("console-session\x00" + id + "\x00" + user))
	return hex.EncodeToString(m.Sum(nil))
}

func validSession(id string) bool {
	if len(id) != 32 {
		return false
	}
	_, err := hex.DecodeString(id)
	return err == nil
}
