// Package copy is the NF message-copy model: the JSON record a 5G network
// function writes for every SBI message it handles, and its codecs.
package copy

// Direction is the trigger point at which the NF copied the message.
type Direction uint8

const (
	DirUnknown Direction = iota
	RequestIngress
	RequestEgress
	ResponseIngress
	ResponseEgress
)

var dirNames = [...]string{"", "REQUEST_INGRESS", "REQUEST_EGRESS", "RESPONSE_INGRESS", "RESPONSE_EGRESS"}

func (d Direction) String() string {
	if int(d) < len(dirNames) {
		return dirNames[d]
	}
	return ""
}

// IsRequest reports whether the copy is of a request (else a response).
func (d Direction) IsRequest() bool { return d == RequestIngress || d == RequestEgress }

// ParseDirection maps the wire name to a Direction (DirUnknown if unknown).
func ParseDirection(s string) Direction {
	for i, n := range dirNames {
		if i > 0 && n == s {
			return Direction(i)
		}
	}
	return DirUnknown
}

// Header is one HTTP/2 header field (pseudo-headers included) with its values,
// in the order the record lists them.
type Header struct {
	Name   string
	Values []string
}

// Copy is one decoded message copy. Strings and Body may alias the buffer the
// copy was decoded from (see Decode); a Copy must not outlive that buffer
// unless Clone'd.
type Copy struct {
	Version       string
	CorrelationID string
	ProducerID    string
	ProducerFQDN  string
	ConsumerID    string
	ConsumerFQDN  string
	HopByHopID    string
	Timestamp     int64 // ns since the epoch
	Direction     Direction
	NFType        string
	NFFQDN        string
	NFInstanceID  string
	PodInstanceID string
	SourceIP      string
	DestIP        string
	SourcePort    uint16
	DestPort      uint16
	Headers       []Header
	Body          []byte // the 5g-sbi-message, unescaped
	Raw           []byte // the whole record as received
}
