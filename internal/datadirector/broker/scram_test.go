package broker

import (
	"encoding/base64"
	"errors"
	"testing"
)

// TestScramRFC7677: the server side of RFC 7677's SCRAM-SHA-256 example
// exchange (user "user", password "pencil") answers what the RFC's server
// answers, and refuses the same exchange with a wrong proof.
func TestScramRFC7677(t *testing.T) {
	salt, _ := base64.StdEncoding.DecodeString("W22ZaJ0SNY7soEsUEjb6gQ==")
	keys, err := deriveScramKeys(MechScramSHA256, "pencil", salt, 4096)
	if err != nil {
		t.Fatal(err)
	}
	newServer := func() *scramServer {
		return &scramServer{mech: MechScramSHA256,
			lookup:      func(u string) (scramKeys, bool) { return keys, u == "user" },
			serverNonce: func() (string, error) { return "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0", nil }}
	}
	s := newServer()
	first, done, err := s.step([]byte("n,,n=user,r=rOprNGfwEbeRWgbNEkqO"))
	if err != nil || done || string(first) != "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096" {
		t.Fatalf("server-first: %q %v %v", first, done, err)
	}
	final, done, err := s.step([]byte("c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="))
	if err != nil || !done || string(final) != "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=" {
		t.Fatalf("server-final: %q %v %v", final, done, err)
	}

	s = newServer()
	s.step([]byte("n,,n=user,r=rOprNGfwEbeRWgbNEkqO"))
	if _, _, err := s.step([]byte("c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=AHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")); !errors.Is(err, errSASL) {
		t.Errorf("a wrong proof: %v", err)
	}
	s = newServer()
	s.step([]byte("n,,n=nobody,r=rOprNGfwEbeRWgbNEkqO"))
	if _, _, err := s.step([]byte("c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")); !errors.Is(err, errSASL) {
		t.Errorf("an unknown user: %v", err)
	}
	for _, bad := range []string{"", "p,,n=user,r=x", "n,,r=x", "n,,n=user"} {
		if _, _, err := newServer().step([]byte(bad)); !errors.Is(err, errSASL) {
			t.Errorf("client-first %q: %v", bad, err)
		}
	}
}
