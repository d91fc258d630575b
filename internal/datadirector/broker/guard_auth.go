package broker

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A connection from another host (guardConn.trusted false) is read a whole
// request at a time: the guard parses it, answers the SASL exchange itself,
// and hands kfake only what the authenticated user may send; a refused
// request is answered with Kafka's authorization error. Its own answers
// wait until kfake has answered what it was handed before, so that
// responses keep the order of the requests.

// authState is an untrusted connection's.
type authState struct {
	user  *credential  // nil until authenticated
	mech  string       // from the handshake
	scram *scramServer // the exchange in progress
	out   []byte       // a request being handed to kfake

	mu          sync.Mutex
	cond        *sync.Cond
	outstanding int // requests handed to kfake it has not answered yet
	closed      bool
}

// readAuthed is Read for an untrusted connection.
func (c *guardConn) readAuthed(p []byte) (int, error) {
	for len(c.auth.out) == 0 {
		if err := c.nextAuthed(); err != nil {
			return 0, err
		}
	}
	n := copy(p, c.auth.out)
	c.auth.out = c.auth.out[n:]
	if len(c.auth.out) == 0 {
		c.g.release(c.host, c.held.Swap(0))
	}
	return n, nil
}

// nextAuthed reads the next request whole and decides what becomes of it.
func (c *guardConn) nextAuthed() error {
	if err := c.next(); err != nil { // its size, checked and reserved
		return err
	}
	if err := c.readWhole(); err != nil {
		return err
	}
	return c.decide()
}

// readWhole reads the rest of the request whose size (and perhaps key)
// was read, into c.whole.
func (c *guardConn) readWhole() error {
	buf := make([]byte, int64(c.hdrLen)+c.left)
	copy(buf, c.hdr[:c.hdrLen])
	if err := c.readBody(buf[c.hdrLen:]); err != nil {
		if isTimeout(err) {
			c.g.refuse(c, RefusedStalled, fmt.Sprintf("a request of %d bytes stopped arriving", len(buf)-4))
		}
		return err
	}
	c.left, c.pending, c.whole = 0, 0, buf
	return nil
}

// decide parses the request read whole and decides what becomes of it:
// handed to kfake (c.auth.out), answered here, or the connection refused.
func (c *guardConn) decide() error {
	buf := c.whole
	c.whole = nil
	release := func() { c.g.release(c.host, c.held.Swap(0)) }

	rd := kbin.Reader{Src: buf[4:]}
	key, version, corr := rd.Int16(), rd.Int16(), rd.Int32()
	rd.NullableString() // client id
	req := kmsg.RequestForKey(key)
	if req == nil || rd.Complete() != nil {
		release()
		c.g.refuse(c, RefusedNotKafka, fmt.Sprintf("a request of unknown API key %d", key))
		return errRefused
	}
	req.SetVersion(version)
	if req.IsFlexible() {
		kmsg.SkipTags(&rd)
	}
	if err := req.ReadFrom(rd.Src); err != nil {
		release()
		c.g.refuse(c, RefusedNotKafka, fmt.Sprintf("a malformed %s request (v%d): %v", kmsg.NameForKey(key), version, err))
		return errRefused
	}

	if c.auth.user == nil {
		switch r := req.(type) {
		case *kmsg.ApiVersionsRequest:
			if c.requests == 1 {
				c.patchVersions = version
			}
			c.handOver(buf, true)
			return nil
		case *kmsg.SASLHandshakeRequest:
			release()
			return c.handshake(r, corr)
		case *kmsg.SASLAuthenticateRequest:
			release()
			return c.authenticate(r, corr)
		}
		release()
		c.g.refuse(c, RefusedUnauthenticated, fmt.Sprintf("%s before authenticating: clients from other hosts authenticate with SASL (SCRAM-SHA-512)", kmsg.NameForKey(key)))
		return errRefused
	}
	switch req.(type) {
	case *kmsg.SASLHandshakeRequest, *kmsg.SASLAuthenticateRequest:
		release()
		c.g.refuse(c, RefusedUnauthenticated, "a second authentication on one connection")
		return errRefused
	}
	if ok, what := c.g.authorize(c.auth.user, req); !ok {
		release()
		c.g.refuse(c, RefusedDenied, fmt.Sprintf("user %s (%s) may not: %s (%s)", c.auth.user.Name, c.auth.user.Role, what, kmsg.NameForKey(key)))
		resp := denyResponse(req)
		if resp == nil {
			return errRefused
		}
		return c.answer(corr, resp)
	}
	expects := true
	if p, ok := req.(*kmsg.ProduceRequest); ok && p.Acks == 0 {
		expects = false // acks=0: no response
	}
	c.handOver(buf, expects)
	return nil
}

// handOver gives kfake a request, counting the response it owes.
func (c *guardConn) handOver(buf []byte, expects bool) {
	if expects {
		c.auth.mu.Lock()
		c.auth.outstanding++
		c.auth.mu.Unlock()
	}
	c.auth.out = buf
}

// handshake answers a SASL handshake: the mechanisms the guard speaks.
func (c *guardConn) handshake(r *kmsg.SASLHandshakeRequest, corr int32) error {
	resp := kmsg.NewPtrSASLHandshakeResponse()
	resp.SetVersion(r.Version)
	resp.SupportedMechanisms = []string{MechScramSHA512, MechScramSHA256, MechPlain}
	if !slices.Contains(resp.SupportedMechanisms, r.Mechanism) {
		resp.ErrorCode = errUnsupportedSASL
		_ = c.answer(corr, resp)
		c.g.refuse(c, RefusedAuthFailed, fmt.Sprintf("SASL mechanism %q (this broker speaks %s)", r.Mechanism, strings.Join(resp.SupportedMechanisms, ", ")))
		return errRefused
	}
	c.auth.mech = r.Mechanism
	return c.answer(corr, resp)
}

// authenticate takes one SASL message of the exchange.
func (c *guardConn) authenticate(r *kmsg.SASLAuthenticateRequest, corr int32) error {
	resp := kmsg.NewPtrSASLAuthenticateResponse()
	resp.SetVersion(r.Version)
	fail := func(user string, err error) error {
		resp.ErrorCode = errSASLAuthentication
		resp.ErrorMessage = kmsg.StringPtr("Authentication failed: invalid credentials")
		_ = c.answer(corr, resp)
		c.g.refuse(c, RefusedAuthFailed, fmt.Sprintf("user %q, %s: %v", user, c.auth.mech, err))
		return errRefused
	}
	switch c.auth.mech {
	case MechPlain:
		user, err := plainAuth(r.SASLAuthBytes, c.g.users.checkPlain)
		if err != nil {
			return fail(user, err)
		}
		c.auth.user, _ = c.g.users.get(user)
		return c.answer(corr, resp)
	case MechScramSHA512, MechScramSHA256:
		if c.auth.scram == nil {
			mech := c.auth.mech
			c.auth.scram = &scramServer{mech: mech, lookup: func(user string) (scramKeys, bool) {
				cred, ok := c.g.users.get(user)
				if !ok {
					return scramKeys{}, false
				}
				return cred.scram[mech], true
			}}
		}
		out, complete, err := c.auth.scram.step(r.SASLAuthBytes)
		if err != nil {
			return fail(c.auth.scram.user, err)
		}
		resp.SASLAuthBytes = out
		if complete {
			c.auth.user, _ = c.g.users.get(c.auth.scram.user)
			c.auth.scram = nil
			if c.auth.user == nil { // removed meanwhile
				return fail("", errSASL)
			}
		}
		return c.answer(corr, resp)
	}
	resp.ErrorCode = errIllegalSASLState
	_ = c.answer(corr, resp)
	c.g.refuse(c, RefusedUnauthenticated, "SASL authenticate before a handshake")
	return errRefused
}

// answer writes the guard's own response to a request, once kfake has
// answered every request handed to it before.
func (c *guardConn) answer(corr int32, resp kmsg.Response) error {
	a := &c.auth
	a.mu.Lock()
	for a.outstanding > 0 && !a.closed {
		a.cond.Wait()
	}
	closed := a.closed
	a.mu.Unlock()
	if closed {
		return errRefused
	}
	buf := make([]byte, 8, 64)
	if resp.IsFlexible() && resp.Key() != 18 {
		buf = append(buf, 0) // the response header's empty tags
	}
	buf = resp.AppendTo(buf)
	binary.BigEndian.PutUint32(buf[:4], uint32(len(buf)-4))
	binary.BigEndian.PutUint32(buf[4:8], uint32(corr))
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_ = c.Conn.SetWriteDeadline(time.Now().Add(c.g.stall))
	_, err := c.Conn.Write(buf)
	_ = c.Conn.SetWriteDeadline(time.Time{})
	return err
}

// Write is kfake writing a response.
func (c *guardConn) Write(b []byte) (int, error) {
	if v := c.patchVersions; v >= 0 {
		c.patchVersions = -1
		advertiseHandshakeV0(b, v)
	}
	if c.trusted {
		return c.Conn.Write(b)
	}
	c.wmu.Lock()
	n, err := c.Conn.Write(b)
	c.wmu.Unlock()
	a := &c.auth
	a.mu.Lock()
	if a.outstanding > 0 {
		a.outstanding--
	}
	a.cond.Broadcast()
	a.mu.Unlock()
	return n, err
}

// advertiseHandshakeV0 makes an ApiVersions response (of request version
// v; b is the whole response: size, correlation id, body) list SaslHandshake
// from version 0, as Kafka does: kfake lists it from 1, and librdkafka takes
// a SASL handshake to be supported only with version 0 listed (it then
// uses version 1). Patched in place; a response it cannot read is left.
func advertiseHandshakeV0(b []byte, v int16) {
	if len(b) < 10 || binary.BigEndian.Uint16(b[8:10]) != 0 {
		return // an error answer (a version downgraded) lists no SASL keys
	}
	rd := kbin.Reader{Src: b[10:]}
	var n int32
	if v >= 3 {
		n = rd.CompactArrayLen()
	} else {
		n = rd.ArrayLen()
	}
	for i := int32(0); i < n && rd.Ok(); i++ {
		at := len(b) - len(rd.Src)
		key := rd.Int16()
		rd.Int16() // min
		rd.Int16() // max
		if v >= 3 {
			kmsg.SkipTags(&rd)
		}
		if key == int16(kmsg.SASLHandshake) && rd.Ok() {
			binary.BigEndian.PutUint16(b[at+2:at+4], 0)
			return
		}
	}
}
