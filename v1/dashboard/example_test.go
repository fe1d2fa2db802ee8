package dashboard_test

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"

	machinery "github.com/b6192125/machinist/v1"
	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/dashboard"
	"github.com/b6192125/machinist/v1/tasks"
)

// The dashboard is an http.Handler: mount it under a prefix of your own
// server. (Here on the in-process broker; the machinist dash command
// serves it for a Redis deployment.)
func ExampleNew() {
	srv, err := machinery.NewServer(&config.Config{Broker: "memory://", NoUnixSignals: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	if _, err := srv.SendTask(&tasks.Signature{Name: "send_email", RoutingKey: "emails"}); err != nil {
		panic(err)
	}

	h, err := dashboard.New(srv, dashboard.Options{Prefix: "/machinist", ReadOnly: true})
	if err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/machinist/", h)

	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/machinist/queues/emails", nil))
	fmt.Println(rec.Code, rec.Header().Get("Content-Type"))
	// Output: 200 text/html; charset=utf-8
}
