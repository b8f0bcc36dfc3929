package e2e

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// The browser of the console's tests: Debian's headless Chromium, driven over the DevTools
// protocol by chromedp (a pipe to the browser, no port), one browser for the tests that share
// it, a tab each. Chromium is a dependency of the tests like Go itself: a missing one fails them
// with what to install, never skips them.

// chromiumPath finds Chromium: $CHROMIUM, else Debian's /usr/bin/chromium, else one in PATH;
// "" when there is none.
func chromiumPath() string {
	if p := os.Getenv("CHROMIUM"); p != "" {
		if _, err := exec.LookPath(p); err != nil {
			return ""
		}
		return p
	}
	for _, name := range []string{"/usr/bin/chromium", "chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// startBrowser starts a headless Chromium with a fresh profile, for the test; its cleanup
// ends it.
func startBrowser(t *testing.T) context.Context {
	t.Helper()
	path := chromiumPath()
	if path == "" {
		t.Fatalf("the console's browser tests need Chromium and found none (CHROMIUM=%q, /usr/bin/chromium, PATH): "+
			"install Debian's chromium package (apt-get install -y chromium; .ci/run does it), or set $CHROMIUM to a Chromium binary",
			os.Getenv("CHROMIUM"))
	}
	// The network is closed here: nothing that reaches out (updates, sync, QUIC probes) is on.
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(path), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck, chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 900))
	ctx, cancel := chromedp.NewContext(alloc)
	if err := chromedp.Do(ctx); err != nil { // starts the browser, with no deadline
		cancel()
		cancelAlloc()
		t.Fatalf("starting Chromium %s: %v", path, err)
	}
	t.Cleanup(func() { cancel(); cancelAlloc() })
	return ctx
}

// tab is a browser tab for one part of a test: its console is watched (an uncaught exception or
// a refusal by the page's Content-Security-Policy fails the test), and headers, when given, go
// with every request it makes (credentials).
type tab struct {
	ctx context.Context

	mu       sync.Mutex
	problems []string
}

func newTab(t *testing.T, browser context.Context, headers map[string]string) *tab {
	t.Helper()
	ctx, cancel := chromedp.NewContext(browser)
	tb := &tab{ctx: ctx}
	messages := chromedp.Console(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.IsException() || strings.Contains(m.Text, "Content Security Policy") {
				tb.mu.Lock()
				tb.problems = append(tb.problems, m.String())
				tb.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		tb.mu.Lock()
		defer tb.mu.Unlock()
		for _, p := range tb.problems {
			t.Errorf("the page's console: %s", p)
		}
	})
	if len(headers) > 0 {
		h := network.Headers{}
		for k, v := range headers {
			h[k] = v
		}
		if _, err := chromedp.Call(ctx, network.Enable, network.EnableParams{}); err != nil {
			t.Fatal(err)
		}
		if _, err := chromedp.Call(ctx, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{Headers: h}); err != nil {
			t.Fatal(err)
		}
	}
	return tb
}

// open loads a console URL and waits until its view has rendered.
func (b *tab) open(t *testing.T, url, view string) {
	t.Helper()
	b.do(t, chromedp.Navigate(url))
	b.wait(t, fmt.Sprintf(`document.querySelector('#main[data-view=%q][data-ready="true"]')`, view), "view "+view+" rendered")
}

func (b *tab) do(t *testing.T, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, waitTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("browser: %v\npage: %s", err, b.text())
	}
}

// eval evaluates a JavaScript expression.
func eval[T any](t *testing.T, b *tab, expr string) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, waitTimeout)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluating %s: %v", expr, err)
	}
	return v
}

// wait polls a JavaScript expression until it is truthy (the page is observed from outside,
// as a user looks at it: a deadline, no fixed sleep).
func (b *tab) wait(t *testing.T, expr, what string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, waitTimeout+5*time.Second)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingTimeout(waitTimeout),
		chromedp.WithPollingInterval(50*time.Millisecond))); err != nil {
		t.Fatalf("waiting for %s (%s): %v\npage: %s", what, expr, err, b.text())
	}
}

// text is the page's visible text, for failure messages.
func (b *tab) text() string {
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ''`))
	if err != nil {
		return "(" + err.Error() + ")"
	}
	return s
}

// screenshotDir is where the screenshots go: $CONSOLE_SCREENSHOTS (docs/console/ for the
// README), else a temporary directory of the test.
func screenshotDir(t *testing.T) string {
	if d := os.Getenv("CONSOLE_SCREENSHOTS"); d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	return t.TempDir()
}

// screenshot saves the whole page as name.png in dir.
func (b *tab) screenshot(t *testing.T, dir, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, waitTimeout)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	path := filepath.Join(dir, name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot %s", path)
}

func basicAuth(user, pass string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))
}
