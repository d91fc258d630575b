package xdr

import (
	"slices"
	"strconv"
	"strings"

	"github.com/signalbox/signalbox/internal/datadirector/nfcopy"
)

// Direction bits of nfPart.seen.
const (
	bReqIn  = 1 << (nfcopy.RequestIngress - 1)
	bReqEg  = 1 << (nfcopy.RequestEgress - 1)
	bRespIn = 1 << (nfcopy.ResponseIngress - 1)
	bRespEg = 1 << (nfcopy.ResponseEgress - 1)
)

type nfPart struct {
	nfType, fqdn, id string
	seen             uint8
	ts               [4]int64 // by direction-1
}

type txn struct {
	key        string
	deadline   int64 // timeout, or end of lingering
	lingers    bool  // complete, held for Linger
	prev, next *txn

	nfs  []nfPart
	hops []Hop
	srcs []srcOff // where its copies were read from (AddFrom)
	offs []srcAt  // each copy's place, with Config.TrackOffsets

	method, path             string
	producerID, producerFQDN string
	consumerFQDN             string
	cause                    string
	reqs, resps              int
	firstReq, lastResp       int64 // timestamps
	status                   int
	reqSize, respSize        int
	ids                      Identities
	reqScanned, respScanned  bool
	dups, retries            int
	start, end               int64
	dia                      *DiameterRecord // a Diameter transaction's
}

// srcOff is a source a transaction's copies were read from, and the lowest
// and highest offsets of them there.
type srcOff struct {
	src      uint32
	off, max int64
}

// srcAt is where one copy was read.
type srcAt struct {
	src uint32
	off int64
}

// from notes a copy of t read from src at off.
func (t *txn) from(src uint32, off int64) {
	for i := range t.srcs {
		if so := &t.srcs[i]; so.src == src {
			so.off, so.max = min(so.off, off), max(so.max, off)
			return
		}
	}
	t.srcs = append(t.srcs, srcOff{src, off, off})
}

func (t *txn) hasNF(k string) bool {
	for i := range t.nfs {
		if t.nfs[i].id == k || t.nfs[i].fqdn == k {
			return true
		}
	}
	return false
}

func (t *txn) pairsMatched() bool {
	if t.reqs == 0 || t.resps == 0 {
		return false
	}
	for i := range t.nfs {
		s := t.nfs[i].seen
		if (s&bReqIn != 0) != (s&bRespEg != 0) || (s&bReqEg != 0) != (s&bRespIn != 0) {
			return false
		}
	}
	return true
}

// add records c; false when it is a duplicate.
func (t *txn) add(c *nfcopy.Copy, s *shard) bool {
	var p *nfPart
	for i := range t.nfs {
		q := &t.nfs[i]
		if c.NFInstanceID != "" && q.id == c.NFInstanceID ||
			c.NFInstanceID == "" && q.id == "" && q.fqdn == c.NFFQDN && q.nfType == c.NFType {
			p = q
			break
		}
	}
	if p == nil {
		t.nfs = append(t.nfs, nfPart{nfType: s.str(c.NFType), fqdn: s.str(c.NFFQDN), id: s.str(c.NFInstanceID)})
		p = &t.nfs[len(t.nfs)-1]
	}
	bit := uint8(1) << (c.Direction - 1)
	dir := c.Direction.String()
	if p.seen&bit != 0 {
		for i := range t.hops {
			h := &t.hops[i]
			if h.Direction == dir && h.HopByHopID == c.HopByHopID && h.NFInstanceID == p.id && h.NFFQDN == p.fqdn && h.NFType == p.nfType {
				t.dups++
				return false
			}
		}
		t.retries++ // another hop-by-hop id at a trigger point already held
	} else {
		p.seen |= bit
		p.ts[c.Direction-1] = c.Timestamp
	}
	h := Hop{NFType: p.nfType, NFFQDN: p.fqdn, NFInstanceID: p.id, Direction: dir, Timestamp: c.Timestamp, HopByHopID: s.str(c.HopByHopID)}
	if len(t.hops) == 0 || c.Timestamp < t.start {
		t.start = c.Timestamp
	}
	if len(t.hops) == 0 || c.Timestamp > t.end {
		t.end = c.Timestamp
	}
	if t.producerID == "" && c.ProducerID != "" {
		t.producerID = strings.Clone(c.ProducerID) // one per producer instance: not worth interning
	}
	if t.producerFQDN == "" && c.ProducerFQDN != "" {
		t.producerFQDN = s.str(c.ProducerFQDN)
	}
	if t.consumerFQDN == "" && c.ConsumerFQDN != "" {
		t.consumerFQDN = s.str(c.ConsumerFQDN)
	}
	latest := !c.Direction.IsRequest() && (t.resps == 0 || c.Timestamp >= t.lastResp)
	switch {
	case c.Protocol == nfcopy.DiameterProtocol:
		h.Status = t.addDiameter(c, s, latest)
	case c.Direction.IsRequest():
		if t.reqs == 0 {
			t.method = s.str(c.Header(":method"))
			t.path = strings.Clone(c.Header(":path"))
		}
		if !t.reqScanned {
			t.reqScanned = true
			t.scan(c.Header(":path"), c.Body)
		}
	default:
		h.Status, _ = strconv.Atoi(c.Header(":status"))
		if latest {
			t.cause = ""
			if h.Status >= 400 {
				t.cause = s.str(ProblemCause(c.Body))
			}
		}
		if !t.respScanned {
			t.respScanned = true
			t.scan("", c.Body)
		}
	}
	t.count(c, h.Status, latest)
	t.hops = append(t.hops, h)
	return true
}

// count counts a request or response copy: the first request's size and
// the earliest request's time, the latest response's time, status and size.
func (t *txn) count(c *nfcopy.Copy, status int, latest bool) {
	if c.Direction.IsRequest() {
		if t.reqs == 0 {
			t.reqSize, t.firstReq = len(c.Body), c.Timestamp
		} else if c.Timestamp < t.firstReq {
			t.firstReq = c.Timestamp
		}
		t.reqs++
		return
	}
	if latest {
		t.lastResp, t.status, t.respSize = c.Timestamp, status, len(c.Body)
	}
	t.resps++
}

// scan fills the identities still missing, owning what it keeps.
func (t *txn) scan(path string, body []byte) {
	var want IdentityKind
	for _, f := range [...]struct {
		k IdentityKind
		v string
	}{{IDSUPI, t.ids.SUPI}, {IDSUCI, t.ids.SUCI}, {IDGPSI, t.ids.GPSI}, {IDPEI, t.ids.PEI}, {IDDNN, t.ids.DNN}, {IDSNSSAI, t.ids.SNSSAI}} {
		if f.v == "" {
			want |= f.k
		}
	}
	if want == 0 {
		return
	}
	var found Identities
	got := found.Find(want, path, body)
	own := func(k IdentityKind, dst *string, v string) {
		if got&k != 0 {
			*dst = strings.Clone(v)
		}
	}
	own(IDSUPI, &t.ids.SUPI, found.SUPI)
	own(IDSUCI, &t.ids.SUCI, found.SUCI)
	own(IDGPSI, &t.ids.GPSI, found.GPSI)
	own(IDPEI, &t.ids.PEI, found.PEI)
	own(IDDNN, &t.ids.DNN, found.DNN)
	own(IDSNSSAI, &t.ids.SNSSAI, found.SNSSAI)
}

func (t *txn) record() Record {
	slices.SortStableFunc(t.hops, func(a, b Hop) int {
		if a.Timestamp != b.Timestamp {
			if a.Timestamp < b.Timestamp {
				return -1
			}
			return 1
		}
		return strings.Compare(dirRank(a.Direction), dirRank(b.Direction))
	})
	svc, ver, _ := SplitPath(t.path)
	r := Record{
		CorrelationID: t.key, Service: svc, APIVersion: ver, Method: t.method, Path: t.path, Status: t.status,
		SUPI: t.ids.SUPI, SUCI: t.ids.SUCI, GPSI: t.ids.GPSI, PEI: t.ids.PEI, DNN: t.ids.DNN, SNSSAI: t.ids.SNSSAI,
		Hops: t.hops, RequestSize: t.reqSize, ResponseSize: t.respSize, Start: t.start, End: t.end,
		Copies: len(t.hops), Duplicates: t.dups, Retries: t.retries, Cause: t.cause,
	}
	if t.dia != nil {
		r.Protocol, r.Diameter = ProtocolDiameter, t.dia
		r.Service = DiameterApplication(t.dia.AppID)
	}
	r.Producer = t.producerID
	if r.Producer == "" {
		r.Producer = t.producerFQDN
	}
	for i := range t.nfs {
		if t.nfs[i].nfType == "SEPP" {
			if r.PLMN = PLMNOf(t.producerFQDN); r.PLMN == "" {
				r.PLMN = PLMNOf(t.consumerFQDN)
			}
			break
		}
	}
	if t.reqs > 0 && t.resps > 0 {
		r.LatencyNs = t.lastResp - t.firstReq
	}
	switch {
	case t.reqs == 0:
		r.Result = ResultOrphanResponse
	case t.resps == 0:
		r.Result = ResultResponseTimeout
	case t.pairsMatched():
		r.Result = ResultComplete
	default:
		r.Result = ResultPartial
	}
	// NFs in the order they first saw the request (else any copy).
	parts := t.nfs // the txn is done with: sort in place
	first := func(p *nfPart) int64 {
		if p.seen&bReqIn != 0 {
			return p.ts[nfcopy.RequestIngress-1]
		}
		if p.seen&bReqEg != 0 {
			return p.ts[nfcopy.RequestEgress-1]
		}
		m := int64(1<<63 - 1)
		for d := range 4 {
			if p.seen&(1<<d) != 0 && p.ts[d] < m {
				m = p.ts[d]
			}
		}
		return m
	}
	slices.SortStableFunc(parts, func(a, b nfPart) int {
		fa, fb := first(&a), first(&b)
		switch {
		case fa < fb:
			return -1
		case fa > fb:
			return 1
		}
		return 0
	})
	r.HopLatencies = make([]HopLatency, len(parts))
	for i := range parts {
		p := &parts[i]
		hl := HopLatency{NFType: p.nfType, NFFQDN: p.fqdn, NFInstanceID: p.id, TotalNs: -1, DownstreamNs: -1, ProcessingNs: -1}
		if p.seen&bReqIn != 0 && p.seen&bRespEg != 0 {
			hl.TotalNs = p.ts[nfcopy.ResponseEgress-1] - p.ts[nfcopy.RequestIngress-1]
		}
		if p.seen&bReqEg != 0 && p.seen&bRespIn != 0 {
			hl.DownstreamNs = p.ts[nfcopy.ResponseIngress-1] - p.ts[nfcopy.RequestEgress-1]
		}
		if hl.TotalNs >= 0 && hl.DownstreamNs >= 0 {
			hl.ProcessingNs = hl.TotalNs - hl.DownstreamNs
		}
		r.HopLatencies[i] = hl
	}
	return r
}

// dirRank orders same-timestamp hops as a transaction flows.
func dirRank(d string) string {
	switch d {
	case "REQUEST_INGRESS":
		return "1"
	case "REQUEST_EGRESS":
		return "2"
	case "RESPONSE_INGRESS":
		return "3"
	}
	return "4"
}
