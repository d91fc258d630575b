package nfcopy

import (
	"math"
	"strconv"
)

// MaxRecordSize bounds a record Decode accepts; larger ones are too_large.
const MaxRecordSize = 4 << 20

// DecodeError is a record Decode rejected. Field names the JSON field at fault
// (dotted path); Reason is a short label from a fixed set, fit for a metric
// label: syntax, missing_field, bad_type, bad_timestamp, bad_direction,
// bad_port, bad_status, too_large.
//
// Incomplete marks a record that is a message copy all the same, only one
// that lacks or garbles what packet and xDR feeds need: a response without
// :status, a request without :method or :path, an unknown direction, a
// header value that is not a string, a missing timestamp or NF type. The
// Copy then holds everything that could be read, and feeds that relay
// records as they are (HTTP/2, Kafka, JSON lines) still deliver it; only
// what is not a copy at all is dead-lettered.
type DecodeError struct {
	Field      string
	Reason     string
	Offset     int // byte offset in the record where the problem was seen
	Incomplete bool
}

func (e *DecodeError) Error() string {
	if e.Field == "" {
		return "copy: " + e.Reason + " at offset " + strconv.Itoa(e.Offset)
	}
	return "copy: " + e.Field + ": " + e.Reason + " at offset " + strconv.Itoa(e.Offset)
}

// Decode parses one message-copy record into c. It is strict about what a
// feed needs (timestamp, message-direction, feed-source.nf-type, and
// :method+:path for requests or :status for responses) and tolerant of
// unknown fields and field order. Duplicate keys: the last one wins, as with
// encoding/json.
//
// Strings without escapes alias raw; escaped ones alias a scratch buffer of c.
// Body and Headers reuse c's capacity, so a Copy reused in a loop allocates
// nothing in steady state. Everything in c is valid until raw is modified or
// the next Decode on c; Clone to keep it longer.
func Decode(raw []byte, c *Copy) error {
	body, hdrs, scratch := c.Body[:0], c.Headers[:0], c.scratch[:0]
	*c = Copy{Body: body, Headers: hdrs, scratch: scratch, Raw: raw}
	if len(raw) > MaxRecordSize {
		return &DecodeError{Reason: "too_large"}
	}
	d := decoder{b: raw, c: c}
	err := d.record()
	c.scratch = d.c.scratch
	if err != nil {
		return err
	}
	if d.incomplete != nil {
		return d.incomplete
	}
	return c.validate()
}

func (c *Copy) validate() error {
	if c.Timestamp < 0 {
		return &DecodeError{Field: "metadata-list.timestamp", Reason: "missing_field", Incomplete: true}
	}
	if c.Direction == DirUnknown {
		return &DecodeError{Field: "metadata-list.message-direction", Reason: "missing_field", Incomplete: true}
	}
	if c.NFType == "" {
		return &DecodeError{Field: "metadata-list.feed-source.nf-type", Reason: "missing_field", Incomplete: true}
	}
	if c.Protocol == DiameterProtocol {
		if c.Direction.IsRequest() != c.Diameter.IsRequest() {
			return &DecodeError{Field: "metadata-list.message-direction", Reason: "bad_direction", Incomplete: true}
		}
		c.diameterIDs()
		return nil
	}
	if c.Direction.IsRequest() {
		if c.exact(":method") == "" {
			return &DecodeError{Field: "header-list.:method", Reason: "missing_field", Incomplete: true}
		}
		if c.exact(":path") == "" {
			return &DecodeError{Field: "header-list.:path", Reason: "missing_field", Incomplete: true}
		}
		return nil
	}
	s := c.exact(":status")
	if s == "" {
		return &DecodeError{Field: "header-list.:status", Reason: "missing_field", Incomplete: true}
	}
	if len(s) != 3 || s[0] < '1' || s[0] > '5' || s[1] < '0' || s[1] > '9' || s[2] < '0' || s[2] > '9' {
		return &DecodeError{Field: "header-list.:status", Reason: "bad_status", Incomplete: true}
	}
	return nil
}

// exact is Header with an exact name match: the pseudo-header names the
// checks need are lower case by HTTP/2 rule.
func (c *Copy) exact(name string) string {
	for i := range c.Headers {
		if c.Headers[i].Name == name && len(c.Headers[i].Values) > 0 {
			return c.Headers[i].Values[0]
		}
	}
	return ""
}

func (d *decoder) record() error {
	d.c.Timestamp = -1
	if d.peek() != '{' {
		return d.syntax("")
	}
	err := d.object("", 1, func(key string) error {
		switch key {
		case "version":
			s, null, err := d.str("version")
			if err != nil {
				return err
			}
			if !null {
				d.c.Version = s
			} else {
				d.c.Version = ""
			}
			return nil
		case "metadata-list":
			return d.metadata()
		case "header-list":
			return d.headers()
		case "5g-sbi-message":
			return d.body()
		case "diameter-message":
			return d.diameterMessage("diameter-message", false)
		case "diameter-message-hex":
			return d.diameterMessage("diameter-message-hex", true)
		}
		return d.skip(key, 2)
	})
	if err != nil {
		return err
	}
	d.ws()
	if d.i != len(d.b) {
		return d.syntax("")
	}
	return nil
}

func (d *decoder) metadata() error {
	c := d.c
	// A repeated metadata-list replaces the earlier one entirely.
	c.CorrelationID, c.ProducerID, c.ProducerFQDN, c.ConsumerID, c.ConsumerFQDN, c.HopByHopID = "", "", "", "", "", ""
	c.Timestamp, c.Direction, c.SourceIP, c.DestIP, c.SourcePort, c.DestPort = -1, DirUnknown, "", "", 0, 0
	c.NFType, c.NFFQDN, c.NFInstanceID, c.PodInstanceID = "", "", "", ""
	if d.isNull() {
		return nil
	}
	return d.object("metadata-list", 2, func(key string) error {
		var dst *string
		var f string // constant field names: no allocation per record
		switch key {
		case "correlation-id":
			dst, f = &c.CorrelationID, "metadata-list.correlation-id"
		case "producer-id":
			dst, f = &c.ProducerID, "metadata-list.producer-id"
		case "producer-fqdn":
			dst, f = &c.ProducerFQDN, "metadata-list.producer-fqdn"
		case "consumer-id":
			dst, f = &c.ConsumerID, "metadata-list.consumer-id"
		case "consumer-fqdn":
			dst, f = &c.ConsumerFQDN, "metadata-list.consumer-fqdn"
		case "hop-by-hop-id":
			dst, f = &c.HopByHopID, "metadata-list.hop-by-hop-id"
		case "source-ip":
			dst, f = &c.SourceIP, "metadata-list.source-ip"
		case "destination-ip":
			dst, f = &c.DestIP, "metadata-list.destination-ip"
		case "timestamp":
			return d.timestamp()
		case "message-direction":
			s, null, err := d.str("metadata-list.message-direction")
			if err != nil {
				return err
			}
			c.Direction = DirUnknown
			if null {
				return nil
			}
			if c.Direction = ParseDirection(s); c.Direction == DirUnknown {
				d.problem("metadata-list.message-direction", "", "bad_direction")
			}
			return nil
		case "source-port":
			return d.port("metadata-list.source-port", &c.SourcePort)
		case "destination-port":
			return d.port("metadata-list.destination-port", &c.DestPort)
		case "feed-source":
			return d.feedSource()
		default:
			return d.skip("metadata-list", 3)
		}
		s, _, err := d.str(f)
		*dst = s
		return err
	})
}

func (d *decoder) feedSource() error {
	c := d.c
	c.NFType, c.NFFQDN, c.NFInstanceID, c.PodInstanceID = "", "", "", ""
	if d.isNull() {
		return nil
	}
	return d.object("metadata-list.feed-source", 3, func(key string) error {
		var dst *string
		var f string
		switch key {
		case "nf-type":
			dst, f = &c.NFType, "metadata-list.feed-source.nf-type"
		case "nf-fqdn":
			dst, f = &c.NFFQDN, "metadata-list.feed-source.nf-fqdn"
		case "nf-instance-id":
			dst, f = &c.NFInstanceID, "metadata-list.feed-source.nf-instance-id"
		case "pod-instance-id":
			dst, f = &c.PodInstanceID, "metadata-list.feed-source.pod-instance-id"
		default:
			return d.skip("metadata-list.feed-source", 4)
		}
		s, _, err := d.str(f)
		*dst = s
		return err
	})
}

func (d *decoder) timestamp() error {
	const field = "metadata-list.timestamp"
	at := d.i
	n, null, ok, err := d.intValue(field, 1<<63-1)
	if err != nil {
		return err
	}
	if null {
		d.c.Timestamp = -1
		return nil
	}
	ns, inRange := epochNanos(n)
	if !ok || !inRange {
		return &DecodeError{Field: field, Reason: "bad_timestamp", Offset: at}
	}
	d.c.Timestamp = ns
	return nil
}

// epochNanos reads an NF's timestamp as nanoseconds since the epoch. The
// reference format has nanoseconds (19 digits), but NFs also write
// microseconds, milliseconds or seconds; the magnitude tells which for any
// time from 2001-09-09 to 2262 (the ranges do not overlap). Anything else
// (before 2001, or not a time at all) is refused rather than read as
// nanoseconds and put in 1970.
func epochNanos(n uint64) (int64, bool) {
	switch {
	case n >= 1e18:
		return int64(n), n <= math.MaxInt64
	case n >= 1e15:
		return int64(n) * 1e3, n <= math.MaxInt64/1000
	case n >= 1e12:
		return int64(n) * 1e6, n <= math.MaxInt64/1000000
	case n >= 1e9:
		return int64(n) * 1e9, n <= math.MaxInt64/1000000000
	}
	return 0, false
}

func (d *decoder) port(field string, dst *uint16) error {
	at := d.i
	n, null, ok, err := d.intValue(field, 65535)
	if err != nil {
		return err
	}
	if null {
		*dst = 0
		return nil
	}
	if !ok {
		return &DecodeError{Field: field, Reason: "bad_port", Offset: at}
	}
	*dst = uint16(n)
	return nil
}

func (d *decoder) headers() error {
	c := d.c
	c.Headers = c.Headers[:0]
	if d.isNull() {
		return nil
	}
	return d.object("header-list", 2, func(name string) error {
		// Duplicate names: the last wins, as encoding/json into a map.
		idx := -1
		for i := range c.Headers {
			if c.Headers[i].Name == name {
				idx = i
				break
			}
		}
		if idx < 0 {
			idx = len(c.Headers)
			if idx < cap(c.Headers) {
				c.Headers = c.Headers[:idx+1]
			} else {
				c.Headers = append(c.Headers, Header{})
			}
			c.Headers[idx].Name = name
		}
		h := &c.Headers[idx]
		h.Values = h.Values[:0]
		if d.isNull() {
			return nil
		}
		if d.peek() == '"' { // a single value not in an array, as some NFs write it
			return d.headerValue(idx)
		}
		if d.peek() != '[' {
			d.problem("header-list.", name, "bad_type")
			return d.skip("header-list", 3)
		}
		d.i++
		if d.peek() == ']' {
			d.i++
			return nil
		}
		for {
			if d.peek() != '"' {
				d.problem("header-list.", name, "bad_type")
				if err := d.skip("header-list", 4); err != nil {
					return err
				}
			} else if err := d.headerValue(idx); err != nil {
				return err
			}
			switch d.peek() {
			case ',':
				d.i++
			case ']':
				d.i++
				return nil
			default:
				return d.syntax("header-list")
			}
		}
	})
}

// headerValue appends the string at d to header idx's values.
func (d *decoder) headerValue(idx int) error {
	v, err := d.rawString("header-list")
	if err != nil {
		return err
	}
	h := &d.c.Headers[idx]
	h.Values = append(h.Values, v)
	return nil
}

func (d *decoder) body() error {
	c := d.c
	c.Body = c.Body[:0]
	if d.isNull() {
		return nil
	}
	if d.peek() != '"' {
		if err := d.skip("5g-sbi-message", 2); err != nil {
			return err
		}
		return d.fail("5g-sbi-message", "bad_type")
	}
	if body, ok := d.appendASCIIString(c.Body); ok {
		c.Body = body
		return nil
	}
	start := d.i + 1
	end, clean, err := d.scanString("5g-sbi-message")
	if err != nil {
		return err
	}
	if clean {
		c.Body = append(c.Body, d.b[start:end]...)
	} else {
		c.Body = unescape(c.Body, d.b[start:end])
	}
	return nil
}
