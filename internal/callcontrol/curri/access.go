package curri

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"
)

// Access says which clients may ask a CURRI listener, as Cisco's ECC
// profile and a route server's own ACLs do: the source networks of the
// CallManager nodes, the names in their client certificates (with mutual
// TLS), and how many connections one node's address may hold (CUCM's "ECC
// Maximum Connection Count to PDP" is at most 20 per node). The zero value
// lets anyone in.
type Access struct {
	// Networks are the source addresses that may connect; empty: any.
	Networks []netip.Prefix
	// Names are the client-certificate identities accepted (the subject's
	// CN, a DNS or IP SAN, a URI SAN), compared without case; empty: any
	// certificate the client CA verifies. Needs a TLS listener that
	// requires client certificates.
	Names []string
	// MaxConnsPerClient bounds the connections open from one address at
	// once; 0: no bound.
	MaxConnsPerClient int
}

// Refusal reasons, the label of signalbox_curri_refused_total.
const (
	RefusedAddress     = "address"     // the source address is not in Networks
	RefusedConnections = "connections" // the address holds MaxConnsPerClient connections already
	RefusedIdentity    = "identity"    // the client certificate names none of Names
)

var refusalReasons = []string{RefusedAddress, RefusedConnections, RefusedIdentity}

// allowed reports whether a may connect.
func (a *Access) allowed(addr netip.Addr) bool {
	if a == nil || len(a.Networks) == 0 {
		return true
	}
	addr = addr.Unmap()
	for _, p := range a.Networks {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}

// identityError is a client certificate that names none of Access.Names.
type identityError struct{ identity string }

func (e *identityError) Error() string {
	return "client certificate " + e.identity + " is not among the accepted CURRI clients"
}

// verifyConnection is the TLS listener's VerifyConnection: after the chain
// is verified, the leaf must carry one of a.Names. Refusing here sends the
// client a bad_certificate alert.
func (a *Access) verifyConnection(cs tls.ConnectionState) error {
	if a == nil || len(a.Names) == 0 {
		return nil
	}
	if len(cs.PeerCertificates) == 0 {
		return &identityError{identity: "(none)"}
	}
	leaf := cs.PeerCertificates[0]
	for _, n := range certNames(leaf) {
		for _, want := range a.Names {
			if strings.EqualFold(n, want) {
				return nil
			}
		}
	}
	return &identityError{identity: Identity(leaf)}
}

// certNames are the names a certificate may be accepted by.
func certNames(c *x509.Certificate) []string {
	names := make([]string, 0, 1+len(c.DNSNames)+len(c.IPAddresses)+len(c.URIs))
	if c.Subject.CommonName != "" {
		names = append(names, c.Subject.CommonName)
	}
	names = append(names, c.DNSNames...)
	for _, ip := range c.IPAddresses {
		names = append(names, ip.String())
	}
	for _, u := range c.URIs {
		names = append(names, u.String())
	}
	return names
}

// Identity describes a client certificate for logs: its subject's CN, its
// SANs and its issuer.
func Identity(c *x509.Certificate) string {
	var b strings.Builder
	fmt.Fprintf(&b, "CN=%q", c.Subject.CommonName)
	sans := certNames(c)
	if c.Subject.CommonName != "" {
		sans = sans[1:] // certNames starts with the CN
	}
	if len(sans) > 0 {
		fmt.Fprintf(&b, " SAN=%s", strings.Join(sans, ","))
	}
	fmt.Fprintf(&b, " issuer=%q", c.Issuer.CommonName)
	return b.String()
}

// refusalLogEvery is how often one client's refusals of one reason are
// logged: a CallManager retries every call, and the log must not flood.
const refusalLogEvery = time.Minute

// refuse counts a refused client and logs it, at most once a minute per
// address and reason.
func (s *Server) refuse(reason string, addr netip.Addr, client, detail string) {
	if c := s.Handler.refused[reason]; c != nil {
		c.Inc()
	}
	key := reason + " " + addr.String()
	now := time.Now()
	s.mu.Lock()
	if s.refusedLogged == nil {
		s.refusedLogged = make(map[string]time.Time)
	}
	last, seen := s.refusedLogged[key]
	if seen && now.Sub(last) < refusalLogEvery {
		s.mu.Unlock()
		return
	}
	if len(s.refusedLogged) > 10_000 { // a scan from many addresses: forget, do not grow
		clear(s.refusedLogged)
	}
	s.refusedLogged[key] = now
	s.mu.Unlock()
	s.Handler.log.Warn("curri client refused", "reason", reason, "client", client, "detail", detail)
}

// admit decides a new connection from addr before anything is read: its
// address allowed, and below the per-address bound (counted in when it is).
// A refused connection is answered 403 or 503 at once on a plain listener
// and closed without a handshake on a TLS one.
func (s *Server) admit(nc net.Conn, addr netip.Addr) bool {
	reason, detail := "", ""
	s.mu.Lock()
	switch {
	case !s.Access.allowed(addr):
		reason, detail = RefusedAddress, "source address not in -curri-allow-from"
	case s.Access != nil && s.Access.MaxConnsPerClient > 0 && s.perAddr[addr] >= s.Access.MaxConnsPerClient:
		reason, detail = RefusedConnections, fmt.Sprintf("already holds %d connections (-curri-max-conns-per-client)", s.perAddr[addr])
	default:
		if s.Access != nil && s.Access.MaxConnsPerClient > 0 {
			s.perAddr[addr]++
		}
	}
	s.mu.Unlock()
	if reason == "" {
		return true
	}
	s.refuse(reason, addr, nc.RemoteAddr().String(), detail)
	if s.TLSConfig != nil {
		nc.Close()
		return false
	}
	status := "403 Forbidden"
	if reason == RefusedConnections {
		status = "503 Service Unavailable"
	}
	go refuseHTTP(nc, status, "CURRI client refused: "+detail+"\n")
	return false
}

// releaseLocked counts a connection of addr out; s.mu is held.
func (s *Server) releaseLocked(addr netip.Addr) {
	if s.Access == nil || s.Access.MaxConnsPerClient <= 0 {
		return
	}
	if s.perAddr[addr]--; s.perAddr[addr] <= 0 {
		delete(s.perAddr, addr)
	}
}

// refuseHTTP answers a refused plain connection with status and closes it,
// reading what the client already sent for a second first so that the
// close does not reset the answer away.
func refuseHTTP(nc net.Conn, status, msg string) {
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(time.Second))
	if _, err := fmt.Fprintf(nc, "HTTP/1.1 %s\r\nContent-Type: text/plain\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		status, len(msg), msg); err != nil {
		return
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	}
	var buf [512]byte
	for {
		if _, err := nc.Read(buf[:]); err != nil {
			return
		}
	}
}

// remoteAddr is nc's peer address (the zero Addr when it has none).
func remoteAddr(nc net.Conn) netip.Addr {
	if ta, ok := nc.RemoteAddr().(*net.TCPAddr); ok {
		return ta.AddrPort().Addr().Unmap()
	}
	ap, _ := netip.ParseAddrPort(nc.RemoteAddr().String())
	return ap.Addr().Unmap()
}

// isIdentityRefusal tells a handshake refused by Access.Names apart.
func isIdentityRefusal(err error) (string, bool) {
	var ie *identityError
	if errors.As(err, &ie) {
		return ie.identity, true
	}
	return "", false
}
