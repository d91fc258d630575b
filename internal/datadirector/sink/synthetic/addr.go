package synthetic

import (
	"net/netip"

	"github.com/signalbox/signalbox/internal/datadirector/nfcopy"
)

// Who is client and who is server. A copy is one HTTP/2 message on one hop;
// the HTTP/2 client is the side that sent the request on that hop:
//
//	REQUEST_INGRESS   consumer → copying NF      client = consumer,   server = NF
//	RESPONSE_EGRESS   copying NF → consumer      client = consumer,   server = NF
//	REQUEST_EGRESS    copying NF → producer      client = NF,         server = producer
//	RESPONSE_INGRESS  producer → copying NF      client = NF,         server = producer
//
// (An NF copying at its own gateways is the producer of what it receives, so
// the table holds for SCP, SEPP and NRF alike.) When the copying NF is not
// identified (no nf-fqdn / nf-instance-id), the producer stands in for it on
// the server side and the consumer on the client side. A copy of unknown
// direction is a response when it carries :status, else a request; it is
// treated as an ingress copy.
//
// Requests travel client→server, responses server→client. Each side's address
// is taken, in order of preference, from:
//  1. the copy's metadata: source-ip/source-port is the sender of this
//     message (client for a request, server for a response),
//     destination-ip/destination-port the receiver;
//  2. the first Mapping whose NFInstanceID or NFFQDN (case-insensitive)
//     matches the side's NF; the mapping's port is used when the NF is the
//     server (a zero port means the default);
//  3. the NF's FQDN itself when it is an IP address (or ip:port), as NFs
//     often write (producer-fqdn "10.251.74.72");
//  4. a stable default: 10.x.y.z from a hash of the NF's FQDN (or instance
//     id).
//
// A consumer or producer the metadata does not name (no id, no FQDN) is
// named as SBI names it: by the NF instance in 3gpp-Sbi-NF-Peer-Info
// (srcinst for the sender of this message, dstinst for its receiver), then,
// for a request, the consumer by its User-Agent and the producer by
// :authority (an IP or IP:port there is used as the address). Unnamed
// peers share one default address per role.
//
// A Diameter copy's peers, when the metadata does not name them, are its
// hosts: a request's Origin-Host is the client, its Destination-Host (else
// -Realm) the server; an answer's Origin-Host is the server. Its server port
// is 3868 unless KeepPorts, where stock Wireshark decodes Diameter.
//
// Ports: the server port is the copy's or mapping's, else 8080. Unless
// KeepPorts, a server port Wireshark does not dissect as HTTP (its http
// dissector's TCP range: 80, 1900, 2710, 2869, 3128, 3132, 5985, 8080, 8088,
// 11371; 443 goes to TLS) becomes 8080 for an http copy and 8088 for an
// https one: the stream is cleartext HTTP/2, which Wireshark's HTTP/2
// heuristic finds only behind its http dissector (packet-http2.c registers
// it on the "http" table). The client uses a stable ephemeral port
// (32768–60999) derived from both addresses when the metadata names them,
// else from both NF identities, so each client/server pair is one TCP flow.
type nfIdent struct{ fqdn, id, role string }

func (e *Encoder) endpoints(c *nfcopy.Copy, ci copyInfo) (client, server netip.AddrPort) {
	nf := nfIdent{c.NFFQDN, c.NFInstanceID, "nf"}
	cons := nfIdent{c.ConsumerFQDN, c.ConsumerID, "consumer"}
	prod := nfIdent{c.ProducerFQDN, c.ProducerID, "producer"}
	if cons.fqdn == "" && cons.id == "" {
		if cons.id = ci.peer(true); cons.id == "" && ci.request {
			cons.id = ci.userAgent
		}
	}
	if prod.fqdn == "" && prod.id == "" {
		if prod.id = ci.peer(false); prod.id == "" && ci.request {
			prod.fqdn = ci.authority
		}
	}
	nfKnown := nf.fqdn != "" || nf.id != ""

	var cl, sv nfIdent
	egress := c.Direction == nfcopy.RequestEgress || c.Direction == nfcopy.ResponseIngress
	switch {
	case egress && nfKnown:
		cl, sv = nf, prod
	case egress:
		cl, sv = cons, prod
	case nfKnown:
		cl, sv = cons, nf
	default:
		cl, sv = cons, prod
	}

	// Metadata: the sender of this message is source-*.
	cMetaIP, cMetaPort := c.SourceIP, c.SourcePort
	sMetaIP, sMetaPort := c.DestIP, c.DestPort
	if !ci.request {
		cMetaIP, cMetaPort, sMetaIP, sMetaPort = sMetaIP, sMetaPort, cMetaIP, cMetaPort
	}

	dia := c.Protocol == nfcopy.DiameterProtocol
	sPort := uint16(defaultHTTPPort)
	switch {
	case dia:
		sPort = diameterPort
	case ci.https:
		sPort = defaultHTTPSPort
	}
	// The client's port, derived only when the metadata does not give it
	// (hashing both FQDNs was a tenth of the encoder's time): from both
	// addresses when the metadata names them, so that a request and its
	// answer land on one connection whichever was copied first (an answer
	// does not name its client as its request does: a Diameter answer has
	// no Destination-Host, an HTTP/2 response no User-Agent); else from
	// both NF identities.
	cPort := func() uint16 {
		if maybeIP(cMetaIP) && maybeIP(sMetaIP) {
			return uint16(32768 + (hashString(hashString(fnvOffset, cMetaIP), sMetaIP) % 28232))
		}
		return uint16(32768 + (hashString(hashString(fnvOffset, cl.key()), sv.key()) % 28232))
	}

	server = e.resolve(sv, sMetaIP, sMetaPort, func() uint16 { return sPort }, true)
	client = e.resolve(cl, cMetaIP, cMetaPort, cPort, false)
	if dia && !e.keepPorts {
		server = netip.AddrPortFrom(server.Addr(), diameterPort)
	} else if !dia && !e.keepPorts && !httpPort(server.Port()) {
		p := uint16(defaultHTTPPort)
		if ci.https {
			p = defaultHTTPSPort
		}
		server = netip.AddrPortFrom(server.Addr(), p)
	}
	if e.clientPort != nil {
		if p := e.clientPort(c); p != 0 {
			client = netip.AddrPortFrom(client.Addr(), p)
		}
	}
	// One flow has one address family: lift a lone IPv4 side into IPv6.
	if client.Addr().Is4() != server.Addr().Is4() {
		client = to6(client)
		server = to6(server)
	}
	return client, server
}

// httpPort reports whether Wireshark's http dissector takes TCP port p by
// default (TCP_DEFAULT_RANGE in epan/dissectors/packet-http.c).
func httpPort(p uint16) bool {
	switch p {
	case 80, 1900, 2710, 2869, 3128, 3132, 5985, 8080, 8088, 11371:
		return true
	}
	return false
}

// peer is the NF instance 3gpp-Sbi-NF-Peer-Info names for the consumer (the
// sender of a request, the receiver of a response) or the producer.
func (ci *copyInfo) peer(consumer bool) string {
	if ci.request == consumer {
		return ci.peerSrc
	}
	return ci.peerDst
}

func to6(ap netip.AddrPort) netip.AddrPort {
	if ap.Addr().Is4() {
		return netip.AddrPortFrom(netip.AddrFrom16(ap.Addr().As16()), ap.Port())
	}
	return ap
}

func (n nfIdent) key() string {
	switch {
	case n.fqdn != "":
		return n.fqdn
	case n.id != "":
		return n.id
	}
	return n.role
}

func (e *Encoder) resolve(n nfIdent, metaIP string, metaPort uint16, defPort func() uint16, isServer bool) netip.AddrPort {
	if maybeIP(metaIP) {
		if a, err := netip.ParseAddr(metaIP); err == nil {
			port := metaPort
			if port == 0 {
				port = defPort()
			}
			return netip.AddrPortFrom(a.Unmap(), port)
		}
	}
	port := defPort()
	if ap, ok := e.lookup(n); ok {
		if isServer && ap.Port() != 0 {
			port = ap.Port()
		}
		return netip.AddrPortFrom(ap.Addr().Unmap(), port)
	}
	if maybeIP(n.fqdn) {
		if a, err := netip.ParseAddr(n.fqdn); err == nil {
			return netip.AddrPortFrom(a.Unmap(), port)
		}
		if ap, err := netip.ParseAddrPort(n.fqdn); err == nil {
			if isServer && ap.Port() != 0 {
				port = ap.Port()
			}
			return netip.AddrPortFrom(ap.Addr().Unmap(), port)
		}
	}
	h := hashString(fnvOffset, n.key())
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, byte(h >> 16), byte(h >> 8), byte(1 + h%254)}), port)
}

func (e *Encoder) lookup(n nfIdent) (netip.AddrPort, bool) {
	if n.id != "" {
		if ap, ok := e.byID[n.id]; ok {
			return ap, true
		}
	}
	if n.fqdn != "" && len(e.byFQDN) > 0 {
		if ap, ok := e.byFQDN[n.fqdn]; ok {
			return ap, true
		}
		if hasUpper(n.fqdn) {
			ap, ok := e.byFQDN[asciiLower(n.fqdn)]
			return ap, ok
		}
	}
	return netip.AddrPort{}, false
}

// maybeIP screens out FQDNs cheaply: netip's parse errors allocate, and this
// runs for every copy.
func maybeIP(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == ':' {
			return true
		} else if c != '.' && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}

const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

// hashString is FNV-1a, continued from h.
func hashString(h uint64, s string) uint64 {
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= fnvPrime
	}
	return h
}

func hashAddrPort(h uint64, ap netip.AddrPort) uint64 {
	b := ap.Addr().As16()
	for _, c := range b {
		h ^= uint64(c)
		h *= fnvPrime
	}
	h ^= uint64(ap.Port())
	return h * fnvPrime
}
