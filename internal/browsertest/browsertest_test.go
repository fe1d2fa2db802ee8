package browsertest

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/chromedp/chromedp"
)

// A tab loads a page, and a confirm() it opens is accepted and recorded.
func TestNewAndAcceptDialogs(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<!doctype html><title>probe</title><button id="b" onclick="document.title = confirm('sure?') ? 'yes' : 'no'">go</button>`)
	}))
	t.Cleanup(srv.Close)
	ctx := New(t)
	seen := AcceptDialogs(ctx)
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL), chromedp.Click(chromedp.ID("b"))); err != nil {
		t.Fatal(err)
	}
	title, err := chromedp.Run(ctx, chromedp.Poll[string](`document.title === "probe" ? false : document.title`))
	if err != nil {
		t.Fatal(err)
	}
	if title != "yes" {
		t.Errorf("after the confirm the title is %q, want yes (accepted)", title)
	}
	if d := seen(); len(d) != 1 || d[0] != "sure?" {
		t.Errorf("dialogs seen: %q, want [sure?]", d)
	}
	w, err := chromedp.Run(ctx, chromedp.Evaluate[int](`window.innerWidth`))
	if err != nil || w != WindowWidth {
		t.Errorf("window width %d (%v), want %d", w, err, WindowWidth)
	}
}
