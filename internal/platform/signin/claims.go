package signin

import (
	"context"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"slices"
	"strings"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
)

// person is who an ID token names and the role their groups give.
type person struct {
	subject, name, role string
	groups              []string
}

// noRoleError: the person is real, but none of their groups has a role.
type noRoleError struct {
	subject, name string
	groups        []string
	claim         string
}

func (e *noRoleError) Error() string {
	groups := "none"
	if len(e.groups) > 0 {
		groups = strings.Join(e.groups, ", ")
	}
	return fmt.Sprintf("%s is in no group that signalbox gives a role to (their %q claim: %s). "+
		"An administrator maps groups to roles with -oidc-admin-groups, -oidc-tracer-groups and -oidc-viewer-groups.",
		e.name, e.claim, groups)
}

// identify verifies the token response's ID token (signature, issuer,
// audience, expiry, nonce) and finds the person's name and role. The
// groups come from the ID token's roles claim or, when it has none, from
// the userinfo endpoint (whose subject must be the ID token's).
func (s *Service) identify(ctx context.Context, tok *oauth2.Token, nonce string) (person, error) {
	p, verifier, _, err := s.discover(ctx, false)
	if err != nil {
		return person{}, err
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return person{}, errors.New("the token response has no ID token (is the openid scope allowed for this client?)")
	}
	idt, err := verifier.Verify(ctx, raw)
	if err != nil {
		return person{}, fmt.Errorf("ID token: %w", err)
	}
	if idt.Nonce != nonce {
		return person{}, errors.New("ID token: its nonce is not this sign-in's (a replayed token?)")
	}
	var claims map[string]any
	if err := idt.Claims(&claims); err != nil {
		return person{}, fmt.Errorf("ID token claims: %w", err)
	}
	groups, found := claimStrings(claims, s.cfg.RolesClaim)
	if (!found || displayName(claims, "") == "") && p.UserInfoEndpoint() != "" {
		ui, err := p.UserInfo(oidc.ClientContext(ctx, s.client), oauth2.StaticTokenSource(tok))
		if err != nil {
			return person{}, fmt.Errorf("userinfo (asked because the ID token lacks the %q claim or a name): %w", s.cfg.RolesClaim, err)
		}
		if ui.Subject != idt.Subject {
			return person{}, fmt.Errorf("userinfo names subject %q, the ID token %q", ui.Subject, idt.Subject)
		}
		var more map[string]any
		if err := ui.Claims(&more); err != nil {
			return person{}, fmt.Errorf("userinfo claims: %w", err)
		}
		for k, v := range more {
			if _, ok := claims[k]; !ok {
				claims[k] = v
			}
		}
		groups, _ = claimStrings(claims, s.cfg.RolesClaim)
	}
	who := person{subject: idt.Subject, name: displayName(claims, idt.Subject), groups: groups}
	who.role = s.roleOf(groups)
	if who.role == "" {
		return who, &noRoleError{subject: who.subject, name: who.name, groups: groups, claim: s.cfg.RolesClaim}
	}
	return who, nil
}

// roleOf gives the widest role any of the groups has.
func (s *Service) roleOf(groups []string) string {
	for _, rg := range []struct {
		role   string
		groups []string
	}{{RoleAdmin, s.cfg.AdminGroups}, {RoleTracer, s.cfg.TracerGroups}, {RoleViewer, s.cfg.ViewerGroups}} {
		for _, g := range groups {
			if slices.Contains(rg.groups, g) {
				return rg.role
			}
		}
	}
	return ""
}

// claimStrings reads a claim that is a string or a list of strings; a
// dotted name reaches into objects (Keycloak's realm_access.roles).
func claimStrings(claims map[string]any, name string) ([]string, bool) {
	var v any = claims
	for _, part := range strings.Split(name, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = m[part]; !ok {
			return nil, false
		}
	}
	switch x := v.(type) {
	case string:
		return []string{x}, true
	case []any:
		out := make([]string, 0, len(x))
		for _, e := range x {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out, true
	}
	return nil, false
}

// displayName is how the audit log and the console name a person.
func displayName(claims map[string]any, subject string) string {
	for _, k := range []string{"preferred_username", "email", "name"} {
		if v, ok := claims[k].(string); ok && strings.TrimSpace(v) != "" {
			return v
		}
	}
	return subject
}

var pageTmpl = template.Must(template.New("page").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{{.Title}} · signalbox</title>
<meta name="viewport" content="width=device-width, initial-scale=1"><link rel="stylesheet" href="/app.css"></head>
<body><main id="main"><section class="card signin" id="signin-error">
<h1>{{.Title}}</h1><p id="signin-message">{{.Message}}</p>
<p><a href="/">Back to the console</a></p></section></main></body></html>
`))

// page answers a browser with a short page (the callback and the login
// are navigations, not API calls).
func (s *Service) page(w http.ResponseWriter, status int, title, msg string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'self'")
	w.WriteHeader(status)
	_ = pageTmpl.Execute(w, struct{ Title, Message string }{title, msg})
}
