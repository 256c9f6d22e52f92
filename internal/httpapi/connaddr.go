package httpapi

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// remoteKey returns the key a connection from remote counts under for the
// per-address cap, and whether it comes from a trusted proxy (whose
// connections no address cap counts). An IPv6 client counts by its /64:
// one host commonly holds a whole /64, so counting its addresses one by
// one would cap nothing.
func (l *ConnLimit) remoteKey(remote net.Addr) (netip.Addr, bool) {
	addr := addrOf(remote)
	if !addr.IsValid() {
		return addr, false // not TCP (a test's pipe): no address to count by
	}
	return addressKey(addr), l.trusted(addr)
}

// addrOf returns remote's IP address, IPv4 ones unmapped.
func addrOf(remote net.Addr) netip.Addr {
	if ta, ok := remote.(*net.TCPAddr); ok {
		addr, _ := netip.AddrFromSlice(ta.IP)
		return addr.Unmap()
	}
	ap, err := netip.ParseAddrPort(remote.String())
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr().Unmap()
}

// addressKey is the per-address key of addr: itself for IPv4, its /64
// for IPv6.
func addressKey(addr netip.Addr) netip.Addr {
	if addr.Is4() {
		return addr
	}
	p, err := addr.Prefix(64)
	if err != nil {
		return addr
	}
	return p.Addr()
}

// trusted reports whether addr is one of the trusted proxies.
func (l *ConnLimit) trusted(addr netip.Addr) bool {
	for _, p := range l.opts.TrustedProxies {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}

// forwardedFor returns the key of the client a trusted proxy forwards r
// for: the last address of X-Forwarded-For that is not itself a trusted
// proxy (each proxy appends the address it got the request from, so
// addresses to the left of it are the client's word, and unverifiable).
// Without one, the request counts under the proxy's own address.
func (l *ConnLimit) forwardedFor(r *http.Request, from *trackedConn) netip.Addr {
	hops := strings.Split(strings.Join(r.Header.Values("X-Forwarded-For"), ","), ",")
	for i := len(hops) - 1; i >= 0; i-- {
		addr, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
		if err != nil {
			break
		}
		if addr = addr.Unmap(); !l.trusted(addr) {
			return addressKey(addr)
		}
	}
	return addressKey(addrOf(from.RemoteAddr()))
}

// ParseTrustedProxies reads the trusted proxies: addresses ("10.0.0.5",
// "::1") or networks ("10.0.0.0/8", "fd00::/8").
func ParseTrustedProxies(list []string) ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(list))
	for _, s := range list {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			addr, aerr := netip.ParseAddr(s)
			if aerr != nil {
				return nil, fmt.Errorf("trusted proxy %q: want an address such as 10.0.0.5 or a network such as 10.0.0.0/8", s)
			}
			addr = addr.Unmap()
			p = netip.PrefixFrom(addr, addr.BitLen())
		}
		out = append(out, p.Masked())
	}
	return out, nil
}
