package synthetic

import "github.com/signalbox/signalbox/internal/datadirector/nfcopy"

// appendDiameter appends the records of a Diameter copy: its message is the
// TCP payload, on a flow of its own peers (no HTTP/2 preface on it), and an
// answer goes on its request's flow (the request's hop-by-hop and end-to-end
// ids name it: nfcopy's PairKey), as a Diameter peer answers on the
// connection the request came in on; a request whose answer was copied
// first goes on the answer's.
func (e *Encoder) appendDiameter(dst []byte, c *nfcopy.Copy) []byte {
	d := &c.Diameter
	ci := copyInfo{request: c.Direction.IsRequest()}
	if ci.request {
		ci.peerSrc, ci.peerDst = d.OriginHost, d.DestHost
		if ci.peerDst == "" {
			ci.peerDst = d.DestRealm
		}
	} else {
		ci.peerSrc = d.OriginHost
	}
	client, server := e.endpoints(c, ci)
	key, pk := flowKey{client, server}, c.PairKey()
	ps, paired := e.partnerOf(pk, ci.request)
	if paired {
		key = ps.key
	}
	slot, dst := e.flow(dst, c.Timestamp, key, false)
	if !paired {
		e.remember(pk, ci.request, pendingStream{key: key, conn: slot.st.conn})
	}
	return e.appendSegments(dst, c.Timestamp, key, &slot.st, ci.request, c.Body, tcpPSHACK)
}
