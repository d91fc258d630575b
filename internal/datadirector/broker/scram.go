package broker

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"strconv"
	"strings"
)

// SASL on the embedded broker's listener is the guard's (auth.go), not
// kfake's: kfake makes every authenticated user a superuser and leaves no
// room for anonymous clients on this host. This file is the server side of
// the mechanisms: SCRAM-SHA-512 and SCRAM-SHA-256 (RFC 5802, as Kafka
// runs them: KIP-84) and PLAIN (RFC 4616).

// scramIterations is the PBKDF2 iteration count of the credentials made
// here (Kafka's minimum is 4096).
const scramIterations = 8192

// scramKeys are what a server keeps of a SCRAM password: never the
// password itself.
type scramKeys struct {
	salt      []byte
	iters     int
	storedKey []byte
	serverKey []byte
}

func scramHash(mech string) func() hash.Hash {
	if mech == MechScramSHA256 {
		return sha256.New
	}
	return sha512.New
}

func hmacSum(h func() hash.Hash, key []byte, msg string) []byte {
	m := hmac.New(h, key)
	m.Write([]byte(msg))
	return m.Sum(nil)
}

// newScramKeys derives the keys of password for mech with a fresh salt.
func newScramKeys(mech, password string) (scramKeys, error) {
	salt := make([]byte, 24)
	if _, err := rand.Read(salt); err != nil {
		return scramKeys{}, err
	}
	return deriveScramKeys(mech, password, salt, scramIterations)
}

// deriveScramKeys derives the keys of password for mech with salt.
func deriveScramKeys(mech, password string, salt []byte, iters int) (scramKeys, error) {
	h := scramHash(mech)
	salted, err := pbkdf2.Key(h, password, salt, iters, h().Size())
	if err != nil {
		return scramKeys{}, err
	}
	client := hmacSum(h, salted, "Client Key")
	stored := h()
	stored.Write(client)
	return scramKeys{salt: salt, iters: iters, storedKey: stored.Sum(nil), serverKey: hmacSum(h, salted, "Server Key")}, nil
}

// scramServer is one SCRAM exchange: client-first, server-first,
// client-final, server-final.
type scramServer struct {
	mech        string
	lookup      func(user string) (scramKeys, bool)
	user        string
	keys        scramKeys
	nonce       string
	clientFirst string // its bare part
	serverFirst string
	done        bool
	// serverNonce makes the server's part of the nonce (random; tests
	// replay RFC 7677's exchange with its own).
	serverNonce func() (string, error)
}

var errSASL = errors.New("authentication failed")

// step takes the client's next message and answers the server's.
func (s *scramServer) step(msg []byte) (out []byte, complete bool, err error) {
	if s.serverFirst == "" {
		return s.first(string(msg))
	}
	return s.final(string(msg))
}

func (s *scramServer) first(msg string) ([]byte, bool, error) {
	// gs2 header: "n,," (no channel binding), or "y,," ; an authzid is
	// not supported.
	rest, ok := strings.CutPrefix(msg, "n,,")
	if !ok {
		if rest, ok = strings.CutPrefix(msg, "y,,"); !ok {
			return nil, false, fmt.Errorf("%w: client-first message without the n,, header", errSASL)
		}
	}
	s.clientFirst = rest
	var cnonce string
	for _, attr := range strings.Split(rest, ",") {
		switch {
		case strings.HasPrefix(attr, "n="):
			s.user = strings.NewReplacer("=2C", ",", "=3D", "=").Replace(attr[2:])
		case strings.HasPrefix(attr, "r="):
			cnonce = attr[2:]
		}
	}
	if s.user == "" || cnonce == "" {
		return nil, false, fmt.Errorf("%w: client-first message without a user or a nonce", errSASL)
	}
	keys, ok := s.lookup(s.user)
	if !ok {
		// Go on with made-up keys, so that an unknown user fails where a
		// wrong password does (and takes as long).
		keys, _ = newScramKeys(s.mech, "")
		keys.storedKey = nil
	}
	s.keys = keys
	if s.serverNonce == nil {
		s.serverNonce = randomNonce
	}
	snonce, err := s.serverNonce()
	if err != nil {
		return nil, false, err
	}
	s.nonce = cnonce + snonce
	s.serverFirst = "r=" + s.nonce + ",s=" + base64.StdEncoding.EncodeToString(keys.salt) + ",i=" + strconv.Itoa(keys.iters)
	return []byte(s.serverFirst), false, nil
}

func (s *scramServer) final(msg string) ([]byte, bool, error) {
	if s.done {
		return nil, false, fmt.Errorf("%w: a message after the exchange", errSASL)
	}
	s.done = true
	i := strings.LastIndex(msg, ",p=")
	if i < 0 {
		return nil, false, fmt.Errorf("%w: client-final message without a proof", errSASL)
	}
	withoutProof, proofB64 := msg[:i], msg[i+3:]
	var nonce string
	for _, attr := range strings.Split(withoutProof, ",") {
		if strings.HasPrefix(attr, "r=") {
			nonce = attr[2:]
		}
	}
	// Kafka accepts a nonce that ends with the server's (librdkafka sends
	// its own nonce again before it): so does this server.
	if !strings.HasSuffix(nonce, s.nonce) {
		return nil, false, fmt.Errorf("%w: the nonce differs", errSASL)
	}
	proof, err := base64.StdEncoding.DecodeString(proofB64)
	h := scramHash(s.mech)
	if err != nil || len(proof) != h().Size() || s.keys.storedKey == nil {
		return nil, false, errSASL
	}
	auth := s.clientFirst + "," + s.serverFirst + "," + withoutProof
	sig := hmacSum(h, s.keys.storedKey, auth)
	clientKey := make([]byte, len(proof))
	for j := range proof {
		clientKey[j] = proof[j] ^ sig[j]
	}
	stored := h()
	stored.Write(clientKey)
	if subtle.ConstantTimeCompare(stored.Sum(nil), s.keys.storedKey) != 1 {
		return nil, false, errSASL
	}
	return []byte("v=" + base64.StdEncoding.EncodeToString(hmacSum(h, s.keys.serverKey, auth))), true, nil
}

func randomNonce() (string, error) {
	var b [18]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return base64.RawStdEncoding.EncodeToString(b[:]), nil
}

// plainAuth checks a PLAIN message (authzid NUL user NUL password) against
// check, answering the user.
func plainAuth(msg []byte, check func(user, password string) bool) (string, error) {
	parts := strings.Split(string(msg), "\x00")
	if len(parts) != 3 || parts[1] == "" {
		return "", fmt.Errorf("%w: a PLAIN message is authzid NUL user NUL password", errSASL)
	}
	if parts[0] != "" && parts[0] != parts[1] {
		return "", fmt.Errorf("%w: PLAIN as another identity", errSASL)
	}
	if !check(parts[1], parts[2]) {
		return parts[1], errSASL
	}
	return parts[1], nil
}
