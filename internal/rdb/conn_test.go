package rdb

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	goredis "github.com/redis/go-redis/v9"
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
		{"redis+socket:///tmp/redis.sock", Target{Socket: "/tmp/redis.sock"}},
		{"redis+socket://secret@/tmp/redis.sock:/3", Target{Socket: "/tmp/redis.sock", Password: "secret", DB: 3}},
		{"redis+socket://u:p@/var/run/redis/r.sock", Target{Socket: "/var/run/redis/r.sock", Username: "u", Password: "p"}},
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
		"redis+socket://user:secret@tmp/relative.sock",
		"redis+socket://user:secret@/tmp/r.sock:/x",
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

// An address that cannot be dialled is refused by Parse, naming it, so
// that NewServer refuses it; IPv6 addresses in brackets are addresses.
func TestParseAddresses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ url, want string }{
		{"redis://[::1]:6380", "[::1]:6380"},
		{"redis://[::1]", "[::1]:6379"},
		{"redis://:secret@h:65535", "h:65535"},
	} {
		got, err := Parse(tc.url)
		if err != nil || len(got.Addrs) != 1 || got.Addrs[0] != tc.want {
			t.Errorf("Parse(%q) = %v, %v; want the address %s", tc.url, got.Addrs, err, tc.want)
		}
	}
	for _, tc := range []struct{ url, names string }{
		{"redis://localhost:notaport", "localhost:notaport"},
		{"redis://:secret@h:0", "h:0"},
		{"redis://h:65536", "h:65536"},
		{"redis://[::1", "[::1"},
		{"redis://::1", "::1"},
		{"redis://a:1,b:x", "b:x"},
	} {
		_, err := Parse(tc.url)
		if !errors.Is(err, ErrURL) || !strings.Contains(err.Error(), tc.names) || strings.Contains(err.Error(), "secret") {
			t.Errorf("Parse(%q): %v, want ErrURL naming %q, without the password", tc.url, err, tc.names)
		}
	}
}

func TestNewClientKinds(t *testing.T) {
	t.Parallel()
	var cnf ClientOptions
	c, err := NewClient("redis://a:1,b:2", cnf)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, ok := c.(*goredis.ClusterClient); !ok {
		t.Errorf("several addresses gave %T, want a cluster client", c)
	}
	cnf.ClusterMode = true
	c2, err := NewClient("redis://a:1", cnf)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if _, ok := c2.(*goredis.ClusterClient); !ok {
		t.Errorf("ClusterMode gave %T, want a cluster client", c2)
	}
	if _, err := NewClient("redis://a:1,b:2/3", ClientOptions{}); err == nil {
		t.Error("a cluster URL with a database number was accepted")
	}
	cnf = ClientOptions{}
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
	cnf.CACertFile = "/nonexistent/ca.pem"
	if _, err := NewClient("rediss://a:1", cnf); err == nil || !strings.Contains(err.Error(), "CACertFile") {
		t.Errorf("missing CA file: %v", err)
	}
	cnf = ClientOptions{}
	c5, err := NewClient("redis+socket://pw@/tmp/r.sock:/2", cnf)
	if err != nil {
		t.Fatal(err)
	}
	defer c5.Close()
	if opts := c5.(*goredis.Client).Options(); opts.Network != "unix" || opts.Addr != "/tmp/r.sock" || opts.Password != "pw" || opts.DB != 2 {
		t.Errorf("redis+socket:// gave network %q, address %q, database %d", opts.Network, opts.Addr, opts.DB)
	}
	cnf.MasterName = "m"
	if _, err := NewClient("redis+socket:///tmp/r.sock", cnf); !errors.Is(err, ErrURL) {
		t.Errorf("redis+socket:// with MasterName: %v, want ErrURL", err)
	}
}
