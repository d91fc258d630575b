// Package curri speaks Cisco Unified CM's External Call Control protocol
// (CURRI): it decodes the XACML 2.0 request CUCM POSTs for every call,
// encodes the XACML response with its CIXML obligation, and serves both over
// HTTP/1.1 with CUCM's HEAD keepalives.
//
// It decides nothing: a Decider (internal/callcontrol/callpolicy behind an adapter) turns
// the decoded call into a callpolicy.Decision. Everything on the per-call path
// is a byte scanner or a precomputed template, so a call costs a few
// microseconds and a handful of allocations.
package curri
