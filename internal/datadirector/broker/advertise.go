package broker

import (
	"net"
	"net/netip"
)

// advertiseFor is the address the broker tells clients to connect to: adv
// when set (its port, when 0 or missing, the one listened on); else the
// listen address addr with the port listened on, where an unspecified host
// (":9092", "0.0.0.0:9092", "[::]:9092": every interface) becomes the
// address other hosts reach this one at (hostAddr), so that NFs on other
// machines can produce; 127.0.0.1 when the host has no other.
func advertiseFor(addr, adv, port string) string {
	if adv != "" {
		h, p, _ := net.SplitHostPort(adv)
		if p == "0" || p == "" {
			p = port
		}
		return net.JoinHostPort(h, p)
	}
	h, _, _ := net.SplitHostPort(addr)
	if ip := net.ParseIP(h); h == "" || ip != nil && ip.IsUnspecified() {
		h = "127.0.0.1"
		// "[::]" listens on both families: an IPv6 address first.
		v6 := ip != nil && ip.To4() == nil
		if a, ok := hostAddr(v6); ok {
			h = a.String()
		} else if a, ok := hostAddr(!v6); ok && v6 {
			h = a.String()
		}
	}
	return net.JoinHostPort(h, port)
}

// hostAddr is the address other hosts reach this one at: the source address
// of its route to the outside (a UDP "connection" to a documentation
// address, which sends nothing), else the first global unicast address of
// an interface that is up. v6 asks for IPv6; false when there is none.
func hostAddr(v6 bool) (netip.Addr, bool) {
	network, probe := "udp4", "203.0.113.1:9" // TEST-NET-3 (RFC 5737)
	if v6 {
		network, probe = "udp6", "[2001:db8::1]:9" // documentation (RFC 3849)
	}
	if c, err := net.Dial(network, probe); err == nil {
		la, _ := c.LocalAddr().(*net.UDPAddr)
		c.Close()
		if la != nil {
			if a, ok := netip.AddrFromSlice(la.IP); ok && usable(a.Unmap(), v6) {
				return a.Unmap(), true
			}
		}
	}
	ifs, err := net.Interfaces()
	if err != nil {
		return netip.Addr{}, false
	}
	for _, ifc := range ifs {
		if ifc.Flags&net.FlagUp == 0 || ifc.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, _ := ifc.Addrs()
		for _, a := range addrs {
			if pn, ok := a.(*net.IPNet); ok {
				if ip, ok := netip.AddrFromSlice(pn.IP); ok && usable(ip.Unmap(), v6) {
					return ip.Unmap(), true
				}
			}
		}
	}
	return netip.Addr{}, false
}

func usable(a netip.Addr, v6 bool) bool {
	return a.IsGlobalUnicast() && a.Is4() != v6
}
