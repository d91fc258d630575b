package synthetic

import (
	"net/netip"
	"testing"

	"github.com/signalbox/signalbox/internal/datadirector/sink/sinkspec"
)

func TestSpecValidateNamesFields(t *testing.T) {
	ok := func(mod func(*Spec)) Spec {
		s := Spec{Endpoint: "10.0.0.1:5000"}
		mod(&s)
		return s
	}
	for _, tt := range []struct {
		name  string
		spec  Spec
		field string
	}{
		{"valid", ok(func(*Spec) {}), ""},
		{"valid host name", ok(func(s *Spec) { s.Endpoint = "probe.example:5000" }), ""},
		{"endpoint missing", Spec{}, "endpoint"},
		{"endpoint without port", ok(func(s *Spec) { s.Endpoint = "probe" }), "endpoint"},
		{"endpoint port", ok(func(s *Spec) { s.Endpoint = "probe:70000" }), "endpoint"},
		{"mapping addr", ok(func(s *Spec) { s.Mappings = []AddrMapping{{NFFQDN: "a", Addr: "host:1"}} }), "mappings[0].addr"},
		{"mapping key", ok(func(s *Spec) {
			s.Mappings = []AddrMapping{{NFFQDN: "a", Addr: "10.0.0.2:80"}, {Addr: "10.0.0.1:80"}}
		}), "mappings[1]"},
		{"mss small", ok(func(s *Spec) { s.Packets = &PacketSpec{MSS: 100} }), "packets.mss"},
		{"mss large", ok(func(s *Spec) { s.Packets = &PacketSpec{MSS: 70000} }), "packets.mss"},
		{"max flows", ok(func(s *Spec) { s.Packets = &PacketSpec{MaxFlows: 2} }), "packets.max_flows"},
		{"packets valid", ok(func(s *Spec) { s.Packets = &PacketSpec{MSS: 9000, MaxFlows: 4, KeepPorts: true} }), ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.spec.Validate(); sinkspec.FieldOf(err) != tt.field {
				t.Fatalf("err = %v, want a *FieldError for %q", err, tt.field)
			}
		})
	}
}

func TestSpecConfig(t *testing.T) {
	s := Spec{Endpoint: "probe:5000",
		Mappings: []AddrMapping{{NFFQDN: "nrf.example", Addr: "10.0.0.7:8443"}, {NFInstanceID: "id-1", Addr: "[2001:db8::1]:80"}},
		Packets:  &PacketSpec{MSS: 1400, MaxFlows: 64, KeepPorts: true, NoHandshake: true}}
	cfg, err := s.Config(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []Mapping{{NFFQDN: "nrf.example", Addr: netip.MustParseAddrPort("10.0.0.7:8443")},
		{NFInstanceID: "id-1", Addr: netip.MustParseAddrPort("[2001:db8::1]:80")}}
	if cfg.Endpoint != "probe:5000" || len(cfg.Mappings) != 2 || cfg.Mappings[0] != want[0] || cfg.Mappings[1] != want[1] {
		t.Fatalf("config = %+v, want the endpoint and both mappings", cfg)
	}
	if cfg.MSS != 1400 || cfg.MaxFlows != 64 || !cfg.KeepPorts || !cfg.NoHandshake {
		t.Fatalf("config = %+v, want the packet settings", cfg)
	}
	if _, err := (&Spec{Endpoint: "probe:5000", Mappings: []AddrMapping{{NFFQDN: "a", Addr: "nope"}}}).Config(nil, nil); err == nil {
		t.Fatal("a bad mapping built a config")
	}
}
