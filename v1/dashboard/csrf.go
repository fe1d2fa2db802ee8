package dashboard

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
)

// csrfCookie names the cookie that identifies a browser to the CSRF
// check, and csrfField the form field that carries its token.
const (
	csrfCookie = "machinist_csrf"
	csrfField  = "csrf"
)

// errCSRF is the error of a POST whose CSRF token is missing or wrong.
var errCSRF = errors.New("the form's security token is missing or does not match this browser's cookie: reload the page and try again")

// csrf issues and checks the tokens that prove a POST comes from a form
// of the dashboard: each browser gets a random cookie (HttpOnly,
// SameSite=Strict), and its forms a token, the HMAC of the cookie under a
// secret (Options.CSRFKey, or one of this process). A token is checked
// against the cookie in constant time.
type csrf struct {
	secret []byte
	path   string // the cookie's Path
	// secure: cookies are Secure whatever the request came over.
	secure bool
}

// newCSRF returns the tokens of a dashboard under prefix, signed with
// key, or with a random key when it is nil; secure marks its cookies
// Secure on every response.
func newCSRF(prefix string, key []byte, secure bool) (*csrf, error) {
	secret := append([]byte(nil), key...)
	if key == nil {
		secret = make([]byte, 32)
		if _, err := rand.Read(secret); err != nil {
			return nil, fmt.Errorf("make the CSRF secret: %w", err)
		}
	}
	return &csrf{secret: secret, path: prefix + "/", secure: secure}, nil
}

// token returns the token of r's browser for its forms, giving the
// browser its cookie first if it has none.
func (c *csrf) token(w http.ResponseWriter, r *http.Request) string {
	id := ""
	if ck, err := r.Cookie(csrfCookie); err == nil && len(ck.Value) >= 26 {
		id = ck.Value
	} else {
		id = rand.Text()
		http.SetCookie(w, &http.Cookie{
			Name:     csrfCookie,
			Value:    id,
			Path:     c.path,
			HttpOnly: true,
			SameSite: http.SameSiteStrictMode,
			Secure:   c.secureFor(r),
		})
	}
	return c.sign(id)
}

func (c *csrf) sign(id string) string {
	m := hmac.New(sha256.New, c.secret)
	m.Write([]byte(id))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// check returns errCSRF unless r's form carries the token of r's cookie.
func (c *csrf) check(r *http.Request) error {
	ck, err := r.Cookie(csrfCookie)
	if err != nil || len(ck.Value) < 26 {
		return errCSRF
	}
	got := r.PostFormValue(csrfField)
	if !hmac.Equal([]byte(got), []byte(c.sign(ck.Value))) {
		return errCSRF
	}
	return nil
}

// secureFor reports whether the cookies of the response to r are Secure.
func (c *csrf) secureFor(r *http.Request) bool { return c.secure || r.TLS != nil }
