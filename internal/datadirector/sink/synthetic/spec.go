package synthetic

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"net/netip"
	"strconv"

	"github.com/signalbox/signalbox/internal/datadirector/sink/sinkspec"
)

// Spec is a synthetic feed's part of the feed's JSON (the director's
// FeedSpec embeds it): the probe's address, NF addresses for copies that
// carry none, and how copies become packets.
type Spec struct {
	Endpoint string        `json:"endpoint,omitempty"` // host:port
	Mappings []AddrMapping `json:"mappings,omitempty"` // nf-fqdn / nf-instance-id -> ip:port
	Packets  *PacketSpec   `json:"packets,omitempty"`  // how copies become packets; nil = the defaults
}

// AddrMapping maps an NF (by fqdn or instance id) to an L3/L4 address used in
// synthetic packets when the copy carries none.
type AddrMapping struct {
	NFFQDN       string `json:"nf_fqdn,omitempty"`
	NFInstanceID string `json:"nf_instance_id,omitempty"`
	Addr         string `json:"addr"` // ip:port
}

// PacketSpec tunes a synthetic feed's packets (EncoderOptions).
type PacketSpec struct {
	MSS         int  `json:"mss,omitempty"`          // largest TCP payload per packet; 0 = 1460
	MaxFlows    int  `json:"max_flows,omitempty"`    // flows open at once; 0 = 100000
	KeepPorts   bool `json:"keep_ports,omitempty"`   // server ports as copied, even those Wireshark does not decode as HTTP
	NoHandshake bool `json:"no_handshake,omitempty"` // no SYN/SYN-ACK/ACK opening a flow, no FIN closing it
}

// Validate returns a *sinkspec.FieldError naming the first field at fault.
func (s *Spec) Validate() error {
	if err := sinkspec.HostPort(s.Endpoint); err != nil {
		return &sinkspec.FieldError{Field: "endpoint", Msg: err.Error()}
	}
	if _, err := s.ParseMappings(); err != nil {
		return err
	}
	if p := s.Packets; p != nil {
		if p.MSS != 0 && (p.MSS < 536 || p.MSS > 65495) {
			return sinkspec.Errorf("packets.mss", "%d: want 536 to 65495 bytes (0: 1460)", p.MSS)
		}
		if p.MaxFlows != 0 && (p.MaxFlows < 4 || p.MaxFlows > 1<<20) {
			return sinkspec.Errorf("packets.max_flows", "%d: want 4 to 1048576 (0: 100000)", p.MaxFlows)
		}
	}
	return nil
}

// ParseMappings parses the spec's address mappings (a pcap file feed uses
// them too), naming the first one at fault.
func (s *Spec) ParseMappings() ([]Mapping, error) {
	out := make([]Mapping, 0, len(s.Mappings))
	for i, mp := range s.Mappings {
		f := "mappings[" + strconv.Itoa(i) + "]"
		if mp.NFFQDN == "" && mp.NFInstanceID == "" {
			return nil, &sinkspec.FieldError{Field: f, Msg: "needs nf_fqdn or nf_instance_id"}
		}
		ap, err := netip.ParseAddrPort(mp.Addr)
		if err != nil {
			return nil, sinkspec.Errorf(f+".addr", "%q: want ip:port", mp.Addr)
		}
		out = append(out, Mapping{NFFQDN: mp.NFFQDN, NFInstanceID: mp.NFInstanceID, Addr: ap})
	}
	return out, nil
}

// Config is the sink's configuration for s, connecting with tc (nil: plain
// TCP); the timeouts and backoff take their defaults.
func (s *Spec) Config(tc *tls.Config, log *slog.Logger) (Config, error) {
	maps, err := s.ParseMappings()
	if err != nil {
		return Config{}, fmt.Errorf("synthetic: %w", err)
	}
	cfg := Config{Endpoint: s.Endpoint, TLS: tc, Mappings: maps, Logger: log}
	if p := s.Packets; p != nil {
		cfg.MSS, cfg.MaxFlows, cfg.KeepPorts, cfg.NoHandshake = p.MSS, p.MaxFlows, p.KeepPorts, p.NoHandshake
	}
	return cfg, nil
}
