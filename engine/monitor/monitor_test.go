package monitor

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// Tests of the monitor without an engine attached: real HTTP on a loopback port the kernel
// picks. The engine's own tests run it over open and served engines.

var httpClient = &http.Client{Timeout: 30 * time.Second}

func startTestMonitor(t testing.TB, start func() (*Monitor, error)) *Monitor {
	t.Helper()
	m, err := start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.Close(); err != nil {
			t.Errorf("monitor close: %v", err)
		}
	})
	return m
}

func httpGet(t testing.TB, m *Monitor, path string) (int, string) {
	t.Helper()
	resp, err := httpClient.Get(m.URL() + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// expectGet checks a GET's status and that its body contains want.
func expectGet(t testing.TB, m *Monitor, path string, code int, want string) string {
	t.Helper()
	got, body := httpGet(t, m, path)
	if got != code || !strings.Contains(body, want) {
		t.Fatalf("GET %s: %d %q, want %d with %q", path, got, body, code, want)
	}
	return body
}

// scrape reads /metrics and parses it as Prometheus' text format.
// TestMonitorFailBeforeAttach: an engine that could not be opened makes /healthz fail.
func TestMonitorFailBeforeAttach(t *testing.T) {
	m := startTestMonitor(t, func() (*Monitor, error) { return Start("127.0.0.1:0", Options{}) })
	expectGet(t, m, "/healthz", http.StatusOK, "ok")
	m.Fail(errors.New("engine: store is locked by pid 42"))
	expectGet(t, m, "/healthz", http.StatusServiceUnavailable, "failed: engine: store is locked by pid 42")
	expectGet(t, m, "/readyz", http.StatusServiceUnavailable, "failed")
}

// TestMonitorPprof: pprof only when asked; other methods than GET are refused.
func TestMonitorPprof(t *testing.T) {
	m := startTestMonitor(t, func() (*Monitor, error) {
		return Start("127.0.0.1:0", Options{Pprof: true})
	})
	expectGet(t, m, "/debug/pprof/", http.StatusOK, "goroutine")
	expectGet(t, m, "/debug/pprof/cmdline", http.StatusOK, "")
	expectGet(t, m, "/debug/pprof/goroutine?debug=1", http.StatusOK, "goroutine profile")
	resp, err := httpClient.Post(m.URL()+"/healthz", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("POST /healthz: %s", resp.Status)
	}

	off := startTestMonitor(t, func() (*Monitor, error) { return Start("127.0.0.1:0", Options{}) })
	expectGet(t, off, "/debug/pprof/", http.StatusNotFound, "")
	expectGet(t, off, "/debug/pprof/cmdline", http.StatusNotFound, "")
}
