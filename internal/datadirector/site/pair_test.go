package site

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestFetchSaysWhatAnswered: a -peer-url that reaches something other than
// the peer site's API is reported as that, not as a peer that does not
// answer.
func TestFetchSaysWhatAnswered(t *testing.T) {
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusNotFound)
		w.Write([]byte("<html>not here</html>"))
	}))
	defer web.Close()
	// A server that answers bytes that are not HTTP (a Kafka broker's
	// listener, say).
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	go func() {
		for {
			c, err := raw.Accept()
			if err != nil {
				return
			}
			buf := make([]byte, 4096)
			c.Read(buf)
			c.Write([]byte{0, 0, 0, 8, 0, 0, 0, 1, 0, 35, 0, 0})
			c.Close()
		}
	}()
	peer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.Header.Get("Authorization") != "Bearer tok" {
			w.WriteHeader(http.StatusUnauthorized)
			w.Write([]byte(`{"error":"unauthorized"}`))
			return
		}
		w.Write([]byte(`{"site":"west","running":[]}`))
	}))
	defer peer.Close()

	for _, c := range []struct{ url, token, want string }{
		{web.URL, "tok", "answered 404 Not Found: not signalbox's API (is -peer-url the peer site's API address?)"},
		{"http://" + raw.Addr().String(), "tok", "answers, but not HTTP: not signalbox's API"},
		{peer.URL, "wrong", "answered 401 Unauthorized: {\"error\":\"unauthorized\"}"},
		{peer.URL, "tok", ""},
	} {
		p := &Pair{cfg: PairConfig{Peer: "west", PeerURL: c.url, PeerToken: c.token, HTTP: &http.Client{Timeout: 2 * time.Second}}}
		st, err := p.fetch(context.Background())
		switch {
		case c.want == "" && (err != nil || st.Site != "west"):
			t.Errorf("%s: %v %v", c.url, st, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v, want an error with %q", c.url, err, c.want)
		}
	}
}
