// Package browsertest drives a real, headless Chromium from tests, through
// chromedp.
//
// New gives a test a tab, in a browser context of its own (its own
// cookies and storage), of the test binary's one browser, started on
// first use and closed when the last tab open is (so that no goroutine or
// process outlives the tests: goleak, as redistest.RunMain runs it, finds
// none), or by the kernel if the test binary dies. Tests
// that run in parallel share the browser; a test that starts after every
// other has finished starts it again (a few hundred milliseconds). The
// browser is Debian's chromium, found on PATH as "chromium" or
// "chromium-browser". When it is missing and the test runs as root, it is
// installed once per test binary (apt-get install -y chromium, after
// apt-get update when the package lists lack it); otherwise the test fails
// saying what to install. No test skips.
//
//	func TestPage(t *testing.T) {
//		ctx := browsertest.New(t)
//		var title string
//		if err := chromedp.Run(ctx, chromedp.Navigate(url), chromedp.Title(&title)); err != nil {
//			t.Fatal(err)
//		}
//	}
package browsertest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// Window is the size of the browser's window, in CSS pixels.
const (
	WindowWidth  = 1440
	WindowHeight = 900
)

// Timeout bounds what a test does in its tab: an upper limit for a loaded
// 2-core machine running other suites beside the browser, never a delay.
const Timeout = 3 * time.Minute

// InstallHint says what to install when no browser is found.
const InstallHint = "apt-get install -y chromium"

var (
	mu          sync.Mutex
	browser     context.Context // the first tab: its context owns the browser
	stopBrowser context.CancelFunc
	stopAlloc   context.CancelFunc
	tabs        int // open, of the browser
	startErr    error
	installOnce sync.Once
	execPath    string
	findErr     error
)

// New returns the context of a new tab of the test binary's browser,
// bounded by Timeout; the tab is closed when t ends. It fails t when no
// browser can be found, installed or started.
func New(t testing.TB) context.Context {
	t.Helper()
	b, err := start()
	if err != nil {
		t.Fatalf("browsertest: %v", err)
	}
	// A browser context of its own: tests running at once share the
	// browser, not their cookies (dashboards on other ports of one host
	// would see each other's).
	tab, closeTab := chromedp.NewContext(b, chromedp.WithNewBrowserContext())
	t.Cleanup(func() {
		closeTab()
		release()
	})
	// The first action on a context opens its tab and binds the tab's
	// life to that context: open it on the tab's own, and bound only the
	// test's actions by Timeout.
	if err := chromedp.Do(tab); err != nil {
		t.Fatalf("browsertest: open a tab: %v", err)
	}
	ctx, cancel := context.WithTimeout(tab, Timeout)
	t.Cleanup(cancel)
	return ctx
}

// AcceptDialogs makes the tab of ctx accept every JavaScript dialog
// (confirm, alert) it opens from now on, until ctx ends, and returns a
// function that lists the messages of those seen so far.
func AcceptDialogs(ctx context.Context) func() []string {
	var mu sync.Mutex
	var seen []string
	dialogs := chromedp.Events(ctx, page.JavascriptDialogOpening)
	go func() {
		// A dialog blocks the action that opened it (a click): it is
		// answered here, beside it.
		for ev, err := range dialogs {
			if err != nil {
				return
			}
			mu.Lock()
			seen = append(seen, ev.Message)
			mu.Unlock()
			if _, err := chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true}); err != nil {
				return
			}
		}
	}()
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), seen...)
	}
}

// release counts a tab closed, and closes the browser after the last.
func release() {
	mu.Lock()
	defer mu.Unlock()
	if tabs--; tabs == 0 {
		shutdown()
	}
}

func shutdown() {
	tabs = 0
	if stopBrowser != nil {
		stopBrowser()
		stopAlloc()
	}
	browser, stopBrowser, stopAlloc, startErr = nil, nil, nil, nil
}

// start returns the browser's context, starting the browser on first use,
// and counts a tab open.
func start() (context.Context, error) {
	mu.Lock()
	defer mu.Unlock()
	if startErr != nil {
		return nil, startErr
	}
	if browser != nil {
		tabs++
		return browser, nil
	}
	path, err := findBrowser()
	if err != nil {
		startErr = err
		return nil, err
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.DisableGPU,
		chromedp.WindowSize(WindowWidth, WindowHeight),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.Flag("font-render-hinting", "none"),
	)
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox)
	}
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	b, cancelBrowser := chromedp.NewContext(alloc)
	// The first action starts the browser, whose life is then bound to
	// the context it was given: b's own.
	if err := chromedp.Do(b); err != nil {
		cancelBrowser()
		cancelAlloc()
		startErr = fmt.Errorf("start %s: %w", path, err)
		return nil, startErr
	}
	browser, stopBrowser, stopAlloc, tabs = b, cancelBrowser, cancelAlloc, 1
	return browser, nil
}

// findBrowser returns the path of chromium, installing it when it is
// missing and the process runs as root.
func findBrowser() (string, error) {
	installOnce.Do(func() {
		if execPath = lookPath(); execPath != "" {
			return
		}
		if os.Geteuid() != 0 {
			findErr = fmt.Errorf("no chromium on PATH (looked for chromium and chromium-browser): install it with `%s` (as root)", InstallHint)
			return
		}
		if err := install(); err != nil {
			findErr = fmt.Errorf("no chromium on PATH, and installing it failed: %w; install it with `%s`", err, InstallHint)
			return
		}
		if execPath = lookPath(); execPath == "" {
			findErr = fmt.Errorf("`%s` succeeded but no chromium is on PATH", InstallHint)
		}
	})
	return execPath, findErr
}

func lookPath() string {
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// install installs Debian's chromium, updating the package lists first
// only when the install fails for want of them.
func install() error {
	out, err := aptGet("install", "-y", "chromium")
	if err == nil {
		return nil
	}
	if !strings.Contains(out, "Unable to locate package") && !strings.Contains(out, "has no installation candidate") &&
		!strings.Contains(out, "Failed to fetch") {
		return err
	}
	if _, err := aptGet("update"); err != nil {
		return err
	}
	_, err = aptGet("install", "-y", "chromium")
	return err
}

func aptGet(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	// Several test binaries may install at once: wait for apt's lock
	// rather than fail on it.
	args = append([]string{"-o", "DPkg::Lock::Timeout=600"}, args...)
	cmd := exec.CommandContext(ctx, "apt-get", args...)
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		tail := out.String()
		if len(tail) > 2000 {
			tail = tail[len(tail)-2000:]
		}
		return out.String(), fmt.Errorf("apt-get %s: %w:\n%s", strings.Join(args, " "), err, tail)
	}
	return out.String(), nil
}
