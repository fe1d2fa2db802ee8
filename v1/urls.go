package machinery

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/b6192125/machinist/internal/redact"
)

// ParseRedisURL reads a "redis://[[user:]password@]host[:port][/db]" URL,
// as machinery's does: host keeps its port; a user information without a
// colon is the password (machinery's older form "redis://password@host");
// a database that is not a number, or none, is 0. A URL of another
// scheme is an error.
func ParseRedisURL(rawURL string) (host, username, password string, db int, err error) {
	if !strings.HasPrefix(rawURL, "redis://") {
		return "", "", "", 0, errors.New("No redis scheme found")
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", "", "", 0, fmt.Errorf("parse redis URL %s: %w", redact.URL(rawURL), errors.Unwrap(err))
	}
	if u.User != nil {
		var ok bool
		if password, ok = u.User.Password(); ok {
			username = u.User.Username()
		} else {
			password = u.User.Username()
		}
	}
	return u.Host, username, password, pathDB(u.Path), nil
}

// ParseRedisSocketURL reads a
// "redis+socket://[[user:]password@]/path/to/redis.sock[:/db]" URL, as
// machinery's does: a user information without a colon is the password,
// and a database that is not a number, or none, is 0.
func ParseRedisSocketURL(rawURL string) (path, username, password string, db int, err error) {
	rest, ok := strings.CutPrefix(rawURL, "redis+socket://")
	if !ok {
		return "", "", "", 0, errors.New("No redis scheme found")
	}
	format := fmt.Errorf("Redis socket connection string should be in format redis+socket://password@/path/to/file.sock:/db, instead got %s", redact.URL(rawURL))
	if user, after, found := strings.Cut(rest, "@"); found {
		rest = after
		if name, pass, both := strings.Cut(user, ":"); both {
			username, password = name, pass
		} else {
			password = user
		}
	}
	path, dbPart, _ := strings.Cut(rest, ":")
	if path == "" {
		return "", "", "", 0, format
	}
	return path, username, password, pathDB(dbPart), nil
}

// pathDB is the database a URL's path names ("/3"), 0 for none or one
// that is not a number.
func pathDB(p string) int {
	_, n, ok := strings.Cut(p, "/")
	if !ok {
		return 0
	}
	db, err := strconv.Atoi(n)
	if err != nil {
		return 0
	}
	return db
}

// ParseBrokers returns the database the last of addrs names ("host:port/3"
// or a "redis://" URL's path; 0 for none) and addrs without their
// databases, as machinery's does for a list of Redis addresses.
func ParseBrokers(addrs []string) (int, []string) {
	out := make([]string, len(addrs))
	db := 0
	for i, a := range addrs {
		hostPort, dbPart, found := strings.Cut(strings.TrimPrefix(a, "redis://"), "/")
		out[i] = hostPort
		if i == len(addrs)-1 && found {
			db = pathDB("/" + dbPart)
		}
	}
	return db, out
}

// ParseGCPPubSubURL reads a "gcppubsub://PROJECT/SUBSCRIPTION" URL, as
// machinery's does. machinist has no Pub/Sub broker: the Server refuses
// such a URL; the function is here for programs that parse one.
func ParseGCPPubSubURL(rawURL string) (project, subscription string, err error) {
	rest, ok := strings.CutPrefix(rawURL, "gcppubsub://")
	if !ok {
		return "", "", errors.New("No gcppubsub scheme found")
	}
	project, subscription, found := strings.Cut(rest, "/")
	if !found || project == "" || subscription == "" || strings.Contains(subscription, "/") {
		return "", "", fmt.Errorf("gcppubsub scheme should be in format gcppubsub://YOUR_GCP_PROJECT_ID/YOUR_PUBSUB_SUBSCRIPTION_NAME, instead got %s", rawURL)
	}
	return project, subscription, nil
}

// RedactURL returns "scheme://host" of a URL, as machinery's does: its
// user information, path and query left out. A string that does not
// parse as a URL comes back with its user information replaced by "***"
// (machinery returned it whole, credentials included).
func RedactURL(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return redact.URL(rawURL)
	}
	return u.Scheme + "://" + u.Host
}
