package machinery_test

import (
	"testing"

	machinery "github.com/b6192125/machinist/v1"
)

func TestParseRedisURL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		url                  string
		host, user, password string
		db                   int
		wantErr              bool
	}{
		{url: "redis://localhost:6379", host: "localhost:6379"},
		{url: "redis://pass@localhost:6379/3", host: "localhost:6379", password: "pass", db: 3},
		{url: "redis://user:pass@10.0.0.1/2", host: "10.0.0.1", user: "user", password: "pass", db: 2},
		{url: "redis://localhost/notanumber", host: "localhost"},
		{url: "rediss://localhost", wantErr: true},
		{url: "localhost:6379", wantErr: true},
	} {
		host, user, password, db, err := machinery.ParseRedisURL(tc.url)
		if (err != nil) != tc.wantErr || host != tc.host || user != tc.user || password != tc.password || db != tc.db {
			t.Errorf("ParseRedisURL(%q) = %q, %q, %q, %d, %v; want %q, %q, %q, %d, error %v",
				tc.url, host, user, password, db, err, tc.host, tc.user, tc.password, tc.db, tc.wantErr)
		}
	}
}

func TestParseRedisSocketURL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		url                  string
		path, user, password string
		db                   int
		wantErr              bool
	}{
		{url: "redis+socket:///tmp/redis.sock", path: "/tmp/redis.sock"},
		{url: "redis+socket://secret@/tmp/redis.sock:/4", path: "/tmp/redis.sock", password: "secret", db: 4},
		{url: "redis+socket://me:secret@/tmp/redis.sock:/1", path: "/tmp/redis.sock", user: "me", password: "secret", db: 1},
		{url: "redis+socket://secret@", wantErr: true},
		{url: "redis:///tmp/redis.sock", wantErr: true},
	} {
		path, user, password, db, err := machinery.ParseRedisSocketURL(tc.url)
		if (err != nil) != tc.wantErr || path != tc.path || user != tc.user || password != tc.password || db != tc.db {
			t.Errorf("ParseRedisSocketURL(%q) = %q, %q, %q, %d, %v; want %q, %q, %q, %d, error %v",
				tc.url, path, user, password, db, err, tc.path, tc.user, tc.password, tc.db, tc.wantErr)
		}
	}
}

func TestParseBrokersAndRedact(t *testing.T) {
	t.Parallel()
	db, addrs := machinery.ParseBrokers([]string{"10.0.0.1:6379", "10.0.0.2:6379/5"})
	if db != 5 || addrs[0] != "10.0.0.1:6379" || addrs[1] != "10.0.0.2:6379" {
		t.Errorf("ParseBrokers: %d, %q", db, addrs)
	}
	if got := machinery.RedactURL("redis://user:secret@localhost:6379/3?x=1"); got != "redis://localhost:6379" {
		t.Errorf("RedactURL: %q", got)
	}
	if got := machinery.RedactURL("redis://user:se%zzcret@localhost"); got != "redis://***@localhost" {
		t.Errorf("RedactURL of a URL that does not parse: %q, want the credentials hidden", got)
	}
	if p, s, err := machinery.ParseGCPPubSubURL("gcppubsub://proj/sub"); err != nil || p != "proj" || s != "sub" {
		t.Errorf("ParseGCPPubSubURL: %q, %q, %v", p, s, err)
	}
	if _, _, err := machinery.ParseGCPPubSubURL("gcppubsub://proj/"); err == nil {
		t.Error("ParseGCPPubSubURL without a subscription: no error")
	}
}
