// Package oidcop starts a real OpenID Connect provider for tests:
// zitadel/oidc's example provider (discovery, login form, authorization
// code with PKCE, RS256-signed ID tokens, userinfo), with the users and
// clients a test names and a "groups" claim per user. It signs with real
// keys and checks client secrets and PKCE; nothing in it is mocked.
package oidcop

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zitadel/oidc/v3/example/server/exampleop"
	"github.com/zitadel/oidc/v3/example/server/storage"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"

	"github.com/signalbox/signalbox/internal/testkit/pki"
)

// User is a person the provider knows.
type User struct {
	ID, Username, Password, First, Last, Email string
	Groups                                     []string
}

// Client is a relying party registered at the provider.
type Client struct {
	ID, Secret, RedirectURI string
}

// Options: GroupsInUserinfoOnly leaves the groups claim out of ID tokens
// (as providers do that keep ID tokens small), so a relying party must ask
// the userinfo endpoint. CA, when set, signs the provider's certificate and
// it serves HTTPS (its issuer https://127.0.0.1:port), as providers do.
type Options struct {
	GroupsInUserinfoOnly bool
	CA                   *pki.CA
}

// Provider is a running provider; Issuer is its URL (http on loopback, or
// https with Options.CA).
type Provider struct {
	Issuer string
	srv    *httptest.Server
	roots  *x509.CertPool // the CA a browser must trust; nil on http
}

// Close stops it (a provider that is down).
func (p *Provider) Close() { p.srv.Close() }

// Start runs a provider on 127.0.0.1 until the test ends.
func Start(t testing.TB, users []User, clients []Client, o Options) *Provider {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	issuer := "http://" + ln.Addr().String()
	if o.CA != nil {
		issuer = "https://" + ln.Addr().String()
	}
	byID := map[string]*storage.User{}
	groups := map[string][]string{}
	for _, u := range users {
		byID[u.ID] = &storage.User{ID: u.ID, Username: u.Username, Password: u.Password, FirstName: u.First,
			LastName: u.Last, Email: u.Email, EmailVerified: true}
		groups[u.ID] = u.Groups
	}
	b, err := json.Marshal(byID)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "users.json")
	if err := os.WriteFile(file, b, 0o600); err != nil {
		t.Fatal(err)
	}
	us, err := storage.StoreFromFile(file)
	if err != nil {
		t.Fatal(err)
	}
	cs := map[string]*storage.Client{}
	for _, c := range clients {
		cs[c.ID] = storage.WebClient(c.ID, c.Secret, c.RedirectURI)
	}
	st := &groupStorage{Storage: storage.NewStorageWithClients(us, cs), groups: groups, idToken: !o.GroupsInUserinfoOnly}
	// The example provider logs every request through slog's default
	// logger, which it replaces with the one given: quiet it.
	router := exampleop.SetupServer(issuer, st, slog.New(slog.DiscardHandler), false)
	srv := httptest.NewUnstartedServer(router)
	srv.Listener.Close()
	srv.Listener = ln
	p := &Provider{Issuer: issuer, srv: srv}
	if o.CA != nil {
		srv.TLS = &tls.Config{Certificates: []tls.Certificate{o.CA.Server(t, "127.0.0.1").TLS}, MinVersion: tls.VersionTLS12}
		srv.StartTLS()
		p.roots = o.CA.Pool
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	return p
}

// groupStorage adds each user's "groups" to the userinfo answer and,
// unless told not to, to the ID token.
type groupStorage struct {
	*storage.Storage
	groups  map[string][]string
	idToken bool
}

func (s *groupStorage) SetUserinfoFromToken(ctx context.Context, ui *oidc.UserInfo, tokenID, subject, origin string) error {
	if err := s.Storage.SetUserinfoFromToken(ctx, ui, tokenID, subject, origin); err != nil {
		return err
	}
	ui.AppendClaims("groups", s.groups[subject])
	return nil
}

func (s *groupStorage) SetUserinfoFromRequest(ctx context.Context, ui *oidc.UserInfo, req op.IDTokenRequest, scopes []string) error {
	if err := s.Storage.SetUserinfoFromRequest(ctx, ui, req, scopes); err != nil {
		return err
	}
	if s.idToken {
		ui.AppendClaims("groups", s.groups[req.GetSubject()])
	}
	return nil
}

// SignIn walks a relying party's sign-in as a browser does: GET start (the
// relying party's login, which redirects here), this provider's login form
// answered with username and password, and back to the relying party. It
// answers the browser (its cookies kept), the last response and its body.
// A relying party that answers start without sending the browser here
// ends the walk at once.
func (p *Provider) SignIn(start, username, password string) (*http.Client, *http.Response, string, error) {
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Timeout: 10 * time.Second}
	if p.roots != nil {
		c.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: p.roots, MinVersion: tls.VersionTLS12}}
	}
	resp, err := c.Get(start)
	if err != nil {
		return c, nil, "", err
	}
	body, err := readBody(resp)
	if err != nil || resp.StatusCode != 200 || !strings.HasPrefix(resp.Request.URL.String(), p.Issuer+"/login/username") {
		return c, resp, body, err
	}
	id := resp.Request.URL.Query().Get("authRequestID")
	resp, err = c.PostForm(p.Issuer+"/login/username", url.Values{"id": {id}, "username": {username}, "password": {password}})
	if err != nil {
		return c, nil, "", err
	}
	body, err = readBody(resp)
	return c, resp, body, err
}

func readBody(r *http.Response) (string, error) {
	defer r.Body.Close()
	b, err := io.ReadAll(r.Body)
	return string(b), err
}
