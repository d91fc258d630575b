package nfcopy

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"strconv"

	"github.com/fiorix/go-diameter/v4/diam"
	"github.com/fiorix/go-diameter/v4/diam/avp"
	"github.com/fiorix/go-diameter/v4/diam/datatype"
	"github.com/fiorix/go-diameter/v4/diam/dict"
)

// A Diameter copy is a record like an SBI copy (the same metadata-list),
// whose message is a whole Diameter message (RFC 6733) in place of the
// header-list and 5g-sbi-message:
//
//	"diameter-message":     the message, base64 (standard alphabet, padding optional)
//	"diameter-message-hex": the message, hex (either case)
//
// The message is the source of truth: its header gives the application,
// command, flags and the hop-by-hop and end-to-end ids, its AVPs the hosts,
// realms, session, result and subscriber. Summary fields a collector may
// add beside it are ignored like any unknown field. The AVPs are decoded by
// go-diameter with its default dictionary (base, credit control, Gx, NAS,
// Ro/Rf, S6a, SWx, Sy); AVPs it does not know, vendor AVPs among them, are
// kept as opaque data, and commands it does not know are relayed like any
// other.
//
// A copy's Body holds the message bytes. Without a correlation-id in the
// metadata, the copy's CorrelationID is "dia-<hop-by-hop>-<end-to-end>"
// (eight hex digits each): request and answer on one hop share both ids
// (RFC 6733 §6.2), so they join into one transaction. An NF that knows the
// transaction across its hops (a DRA relaying under a new hop-by-hop id)
// names it with its own correlation-id. An empty hop-by-hop-id metadata field
// becomes the header's hop-by-hop id (hex).

// Protocol is what kind of message a copy holds.
type Protocol uint8

const (
	// SBI is an HTTP/2 SBI message: header-list and 5g-sbi-message.
	SBI Protocol = iota
	// DiameterProtocol is a Diameter message: diameter-message.
	DiameterProtocol
)

func (p Protocol) String() string {
	if p == DiameterProtocol {
		return "diameter"
	}
	return "sbi"
}

// Diameter is what a Diameter copy's message says, decoded once.
type Diameter struct {
	Flags       uint8 // command flags: R, P, E, T
	Command     uint32
	AppID       uint32
	HopByHop    uint32
	EndToEnd    uint32
	OriginHost  string
	OriginRealm string
	DestHost    string
	DestRealm   string
	SessionID   string
	UserName    string
	// ResultCode is the Result-Code, else the Experimental-Result-Code
	// (Experimental set); 0 in a request or an answer with neither.
	ResultCode   uint32
	Experimental bool
	// IMSI and MSISDN are the subscriber's digits: from User-Name when it
	// is all digits (S6a, SWx), else from Subscription-Id (Gx, Gy, Rx).
	IMSI, MSISDN string
}

// IsRequest reports the header's R bit.
func (d *Diameter) IsRequest() bool { return d.Flags&diam.RequestFlag != 0 }

// CommandName is the command's abbreviation with R or A, e.g. ULR or CCA;
// "" for a command the dictionary does not know.
func (d *Diameter) CommandName() string {
	cmd, err := dict.Default.FindCommand(d.AppID, d.Command)
	if err != nil || cmd.Short == "" {
		return ""
	}
	if d.IsRequest() {
		return cmd.Short + "R"
	}
	return cmd.Short + "A"
}

// AVP codes read from a Diameter copy (RFC 6733, RFC 4006).
const (
	avpUserName           = 1
	avpSessionID          = 263
	avpOriginHost         = 264
	avpResultCode         = 268
	avpDestRealm          = 283
	avpDestHost           = 293
	avpOriginRealm        = 296
	avpExperimentalResult = 297
	avpExperimentalCode   = 298
	avpSubscriptionID     = 443
	avpSubscriptionIDData = 444
	avpSubscriptionIDType = 450

	subIDE164 = 0 // Subscription-Id-Type END_USER_E164
	subIDIMSI = 1 // END_USER_IMSI

	appCreditControl = 4 // whose dictionary defines Subscription-Id
)

// diameterMessage decodes a diameter-message field's value into the copy's
// Body and Diameter. A value that is not base64 (or hex), or a message that
// is not well-formed Diameter, leaves the copy incomplete.
func (d *decoder) diameterMessage(key string, isHex bool) error {
	c := d.c
	c.Protocol = DiameterProtocol
	c.Body = c.Body[:0]
	s, null, err := d.str(key)
	if err != nil || null {
		if null {
			d.problem(key, "", "missing_field")
		}
		return err
	}
	if isHex {
		c.Body, err = hex.AppendDecode(c.Body, []byte(s))
	} else {
		enc := base64.StdEncoding
		if len(s)%4 != 0 {
			enc = base64.RawStdEncoding
		}
		c.Body, err = enc.AppendDecode(c.Body, []byte(s))
	}
	if err != nil {
		d.problem(key, "", "bad_encoding")
		return nil
	}
	if reason := decodeDiameter(c.Body, &c.Diameter); reason != "" {
		d.problem(key, "", reason)
	}
	return nil
}

// decodeDiameter fills dm from a whole Diameter message; it returns "" or
// the reason the message is not well-formed: bad_diameter_header (short,
// not version 1, length not the message's), bad_avp (an AVP shorter than
// its header or running past the message).
func decodeDiameter(b []byte, dm *Diameter) (reason string) {
	*dm = Diameter{}
	// The library is outside code: what it panics on is a malformed
	// message like any other.
	defer func() {
		if recover() != nil {
			reason = "bad_avp"
		}
	}()
	if len(b) < diam.HeaderLength {
		return "bad_diameter_header"
	}
	h, err := diam.DecodeHeader(b[:diam.HeaderLength])
	if err != nil || h.Version != 1 || int(h.MessageLength) != len(b) {
		return "bad_diameter_header"
	}
	dm.Flags, dm.Command, dm.AppID = h.CommandFlags, h.CommandCode, h.ApplicationID
	dm.HopByHop, dm.EndToEnd = h.HopByHopID, h.EndToEndID
	for p := b[diam.HeaderLength:]; len(p) > 0; {
		if len(p) < 8 {
			return "bad_avp"
		}
		if l := int(binary.BigEndian.Uint32(p[4:8]) & 0xffffff); l > len(p) || l < 8 || p[4]&avp.Vbit != 0 && l < 12 {
			return "bad_avp"
		}
		a, err := diam.DecodeAVP(p, h.ApplicationID, dict.Default)
		if err != nil {
			return "bad_avp"
		}
		dm.take(a, h.ApplicationID)
		n := a.Len()
		if n <= 0 || n > len(p) {
			n = len(p) // the last AVP's padding may be missing
		}
		p = p[n:]
	}
	if dm.IMSI == "" && allDigits(dm.UserName) {
		dm.IMSI = dm.UserName
	}
	return ""
}

// take keeps what a top-level AVP says.
func (dm *Diameter) take(a *diam.AVP, app uint32) {
	switch {
	case a.VendorID != 0 && a.Flags&avp.Vbit != 0:
		return
	case a.Code == avpOriginHost:
		dm.OriginHost = text(a.Data)
	case a.Code == avpOriginRealm:
		dm.OriginRealm = text(a.Data)
	case a.Code == avpDestHost:
		dm.DestHost = text(a.Data)
	case a.Code == avpDestRealm:
		dm.DestRealm = text(a.Data)
	case a.Code == avpSessionID:
		dm.SessionID = text(a.Data)
	case a.Code == avpUserName:
		dm.UserName = text(a.Data)
	case a.Code == avpResultCode:
		dm.ResultCode, dm.Experimental = unsigned(a.Data), false
	case a.Code == avpExperimentalResult && dm.ResultCode == 0:
		for _, in := range grouped(a, app) {
			if in.Code == avpExperimentalCode {
				dm.ResultCode, dm.Experimental = unsigned(in.Data), true
			}
		}
	case a.Code == avpSubscriptionID:
		typ, data := uint32(1<<31), ""
		for _, in := range grouped(a, appCreditControl) {
			switch in.Code {
			case avpSubscriptionIDType:
				typ = unsigned(in.Data)
			case avpSubscriptionIDData:
				data = text(in.Data)
			}
		}
		switch {
		case typ == subIDIMSI && dm.IMSI == "":
			dm.IMSI = data
		case typ == subIDE164 && dm.MSISDN == "":
			dm.MSISDN = data
		}
	}
}

// grouped is a grouped AVP's members, decoding them when the application's
// dictionary did not know the AVP as grouped (Subscription-Id in Rx, say).
func grouped(a *diam.AVP, app uint32) []*diam.AVP {
	switch v := a.Data.(type) {
	case *diam.GroupedAVP:
		return v.AVP
	case datatype.Unknown:
		if g, err := diam.DecodeGrouped(datatype.Grouped(v), app, dict.Default); err == nil {
			return g.AVP
		}
	case datatype.Grouped:
		if g, err := diam.DecodeGrouped(v, app, dict.Default); err == nil {
			return g.AVP
		}
	}
	return nil
}

func text(t datatype.Type) string {
	switch v := t.(type) {
	case datatype.DiameterIdentity:
		return string(v)
	case datatype.UTF8String:
		return string(v)
	case datatype.OctetString:
		return string(v)
	case datatype.Unknown:
		return string(v)
	}
	return ""
}

func unsigned(t datatype.Type) uint32 {
	switch v := t.(type) {
	case datatype.Unsigned32:
		return uint32(v)
	case datatype.Enumerated:
		return uint32(v)
	case datatype.Integer32:
		return uint32(v)
	case datatype.Unknown:
		if len(v) == 4 {
			return binary.BigEndian.Uint32(v)
		}
	}
	return 0
}

func allDigits(s string) bool {
	if len(s) < 5 || len(s) > 15 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// diameterIDs fills, for a Diameter copy, the correlation-id and
// hop-by-hop-id the metadata left empty (see the package comment above).
func (c *Copy) diameterIDs() {
	if c.CorrelationID == "" {
		var b [4 + 8 + 1 + 8]byte
		id := append(b[:0], "dia-"...)
		id = appendHex32(id, c.Diameter.HopByHop)
		id = append(id, '-')
		c.CorrelationID = string(appendHex32(id, c.Diameter.EndToEnd))
	}
	if c.HopByHopID == "" {
		c.HopByHopID = strconv.FormatUint(uint64(c.Diameter.HopByHop), 16)
	}
}

func appendHex32(b []byte, v uint32) []byte {
	for i := 28; i >= 0; i -= 4 {
		b = append(b, hexDigits[v>>uint(i)&0xf])
	}
	return b
}

// appendDiameterMessage appends a Diameter copy's message (Body) as the
// record's diameter-message field, base64.
func appendDiameterMessage(dst []byte, body []byte) []byte {
	dst = append(dst, `,"diameter-message":"`...)
	dst = base64.StdEncoding.AppendEncode(dst, body)
	return append(dst, '"')
}
