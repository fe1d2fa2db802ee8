package rdb

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/b6192125/machinist/v1/config"
)

func TestParse(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		url  string
		want Target
	}{
		{"redis://localhost:6379", Target{Addrs: []string{"localhost:6379"}}},
		{"redis://localhost", Target{Addrs: []string{"localhost:6379"}}},
		{"redis://:secret@h:1/2", Target{Addrs: []string{"h:1"}, Password: "secret", DB: 2}},
		{"redis://user:p%40ss@h:1", Target{Addrs: []string{"h:1"}, Username: "user", Password: "p@ss"}},
		{"redis://onlypassword@h:1", Target{Addrs: []string{"h:1"}, Password: "onlypassword"}},
		{"rediss://a:1,b:2,c:3", Target{Addrs: []string{"a:1", "b:2", "c:3"}, TLS: true}},
	} {
		got, err := Parse(tc.url)
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Parse(%q) = %+v, %v; want %+v", tc.url, got, err, tc.want)
		}
	}
}

func TestParseErrorsHideCredentials(t *testing.T) {
	t.Parallel()
	for _, u := range []string{
		"http://user:secret@h",
		"redis://user:secret@",
		"redis://user:secret@h:1/notanumber",
	} {
		_, err := Parse(u)
		if !errors.Is(err, ErrURL) {
			t.Errorf("Parse(%q): %v, want ErrURL", u, err)
		}
		if err != nil && strings.Contains(err.Error(), "secret") {
			t.Errorf("Parse(%q) error shows the password: %v", u, err)
		}
	}
	if s := (Target{Addrs: []string{"h:1"}, Password: "secret"}).String(); strings.Contains(s, "secret") {
		t.Errorf("Target.String shows the password: %s", s)
	}
}

func TestNewClientKinds(t *testing.T) {
	t.Parallel()
	cnf := (&config.Config{}).WithDefaults()
	c, err := NewClient("redis://a:1,b:2", cnf)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, ok := c.(*goredis.ClusterClient); !ok {
		t.Errorf("several addresses gave %T, want a cluster client", c)
	}
	cnf.Redis.ClusterMode = true
	c2, err := NewClient("redis://a:1", cnf)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if _, ok := c2.(*goredis.ClusterClient); !ok {
		t.Errorf("ClusterMode gave %T, want a cluster client", c2)
	}
	if _, err := NewClient("redis://a:1,b:2/3", (&config.Config{}).WithDefaults()); err == nil {
		t.Error("a cluster URL with a database number was accepted")
	}
	cnf = (&config.Config{}).WithDefaults()
	c3, err := NewClient("redis://a:1", cnf)
	if err != nil {
		t.Fatal(err)
	}
	defer c3.Close()
	if opts := c3.(*goredis.Client).Options(); opts.TLSConfig != nil {
		t.Error("a redis:// URL switched TLS on")
	}
	c4, err := NewClient("rediss://a:1", cnf)
	if err != nil {
		t.Fatal(err)
	}
	defer c4.Close()
	if opts := c4.(*goredis.Client).Options(); opts.TLSConfig == nil || opts.TLSConfig.ServerName != "a" {
		t.Errorf("rediss:// TLS config %+v, want ServerName a", opts.TLSConfig)
	}
	cnf.Redis.CACertFile = "/nonexistent/ca.pem"
	if _, err := NewClient("rediss://a:1", cnf); err == nil || !strings.Contains(err.Error(), "CACertFile") {
		t.Errorf("missing CA file: %v", err)
	}
}
