package probe

import (
	"encoding/binary"
	"fmt"
	"time"
)

// diameterPort is where a synthetic stream carries Diameter (RFC 6733): a
// flow to or from it holds whole Diameter messages back to back, not
// HTTP/2.
const diameterPort = 3868

// diameterHeader is the length of a Diameter message header.
const diameterHeader = 20

// diameterLabel is what Diameter messages count under in Report.PerNF.
const diameterLabel = "DIAMETER"

// diameter frames a Diameter flow's payload into messages, counting each
// as a copy (Report.PerNF["DIAMETER"]); a message split over segments
// waits in the flow's buffer for the rest.
func (d *connDecoder) diameter(f *flow, payload []byte, size int, ts int64, now time.Time) {
	in := payload
	if len(f.buf) > 0 {
		f.buf = append(f.buf, payload...)
		in = f.buf
	}
	f.copyBytes += size
	for len(in) >= diameterHeader {
		n := int(binary.BigEndian.Uint32(in[0:4]) & 0xffffff)
		if in[0] != 1 || n < diameterHeader || n%4 != 0 || n > maxFrameBuf {
			d.s.bad("bad_diameter", fmt.Sprintf("message header version %d, length %d", in[0], n))
			f.buf = f.buf[:0]
			f.lost = true
			return
		}
		if len(in) < n {
			break
		}
		d.s.copySeen("", diameterLabel, f.copyBytes, n, ts, now)
		f.copyBytes = 0
		in = in[n:]
	}
	f.buf = append(f.buf[:0], in...) // in may be f.buf: append copies forward
}
