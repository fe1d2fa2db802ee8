// Package redact hides credentials in what machinist logs and returns.
package redact

import "strings"

// URL returns u with its user information (user name and password)
// replaced by "***", so that credentials never reach a log line or an
// error.
func URL(u string) string {
	at := strings.LastIndex(u, "@")
	if at < 0 {
		return u
	}
	if scheme, _, ok := strings.Cut(u[:at], "://"); ok && isScheme(scheme) {
		return scheme + "://***@" + u[at+1:]
	}
	return "***@" + u[at+1:]
}

// isScheme reports whether s is a URL scheme (RFC 3986: a letter, then
// letters, digits, "+", "-" or ".").
func isScheme(s string) bool {
	for i, r := range s {
		switch {
		case 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z':
		case i > 0 && ('0' <= r && r <= '9' || r == '+' || r == '-' || r == '.'):
		default:
			return false
		}
	}
	return s != ""
}
