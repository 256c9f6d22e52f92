package webhook

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"
)

// blockedNetworks are never dialled unless Policy.Allow lifts them:
// link-local addresses, where every major cloud serves instance metadata
// and credentials (169.254.169.254, AWS's fd00:ec2::254, Alibaba's
// 100.100.100.200), and addresses that are no single host: "this host"
// (0.0.0.0 reaches loopback services), multicast and broadcast.
var blockedNetworks = []netip.Prefix{
	netip.MustParsePrefix("169.254.0.0/16"),
	netip.MustParsePrefix("fe80::/10"),
	netip.MustParsePrefix("fd00:ec2::254/128"),
	netip.MustParsePrefix("100.100.100.200/32"),
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("::/128"),
	netip.MustParsePrefix("224.0.0.0/4"),
	netip.MustParsePrefix("ff00::/8"),
	netip.MustParsePrefix("255.255.255.255/32"),
}

// Policy says which addresses outbound requests (webhooks, guards) may
// reach. The zero Policy refuses blockedNetworks and allows the rest.
type Policy struct {
	// Allow lifts the block on these networks, e.g. a metadata-like
	// address that is in fact the operator's own service.
	Allow []netip.Prefix
	// Deny blocks these networks as well, e.g. the private ranges of a
	// deployment whose receivers are all on the internet.
	Deny []netip.Prefix
	// Resolver resolves host names; nil is net.DefaultResolver.
	Resolver *net.Resolver
}

// ErrAddressRefused is the error for a request to an address the policy
// refuses.
var ErrAddressRefused = errors.New("address refused")

// Check returns an error wrapping ErrAddressRefused if ip may not be
// dialled.
func (p Policy) Check(ip netip.Addr) error {
	ip = ip.Unmap()
	for _, n := range p.Deny {
		if n.Contains(ip) {
			return fmt.Errorf("%w: %s is in %s, which webhooks.deny_networks blocks", ErrAddressRefused, ip, n)
		}
	}
	for _, n := range p.Allow {
		if n.Contains(ip) {
			return nil
		}
	}
	for _, n := range blockedNetworks {
		if n.Contains(ip) {
			return fmt.Errorf("%w: %s is a link-local, metadata or non-host address (%s); "+
				"list it in webhooks.allow_networks to allow it", ErrAddressRefused, ip, n)
		}
	}
	return nil
}

// control is the dialer's last word on an address: it runs after the
// name is resolved and before the connection is made, for every address
// tried, so neither DNS nor a second resolution can route around Check.
func (p Policy) control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: %s is not an IP address and port", ErrAddressRefused, address)
	}
	return p.Check(ap.Addr())
}

// Client returns an HTTP client for outbound requests under p: every
// connection is checked by p, no proxy from the environment is used (it
// would be the address dialled, not the receiver), redirects are not
// followed (a receiver must answer itself), and each request takes at
// most timeout.
func (p Policy) Client(timeout time.Duration) *http.Client {
	dialer := &net.Dialer{Timeout: min(timeout, 10*time.Second), KeepAlive: 30 * time.Second,
		Resolver: p.Resolver, Control: p.control}
	transport := &http.Transport{
		Proxy: nil, DialContext: dialer.DialContext, ForceAttemptHTTP2: true,
		MaxIdleConns: 64, MaxIdleConnsPerHost: 4, IdleConnTimeout: 90 * time.Second,
		TLSHandshakeTimeout: 10 * time.Second, ResponseHeaderTimeout: timeout,
	}
	return &http.Client{Transport: transport, Timeout: timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// maxURLBytes bounds a receiver's URL.
const maxURLBytes = 2048

// CheckURL validates a receiver's URL: https, or http to a loopback host
// (a receiver on the same machine); no credentials in it; and, when its
// host is an IP address, one p allows. A host name is checked again, on
// what it resolves to, each time it is dialled.
func (p Policy) CheckURL(raw string) error {
	if len(raw) > maxURLBytes {
		return fmt.Errorf("longer than %d bytes", maxURLBytes)
	}
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() || u.Host == "" || u.Opaque != "" {
		return errors.New("must be an absolute URL such as https://hooks.example.com/kerneld")
	}
	if u.User != nil {
		return errors.New("must not carry credentials (user:password@): they would be stored and listed")
	}
	if u.Fragment != "" {
		return errors.New("must not have a fragment")
	}
	host := u.Hostname()
	ip, ipErr := netip.ParseAddr(host)
	switch {
	case u.Scheme == "https":
	case u.Scheme == "http" && (strings.EqualFold(host, "localhost") || (ipErr == nil && ip.IsLoopback())):
	default:
		return errors.New("must be https (http only to localhost or a loopback address)")
	}
	if ipErr == nil {
		return p.Check(ip)
	}
	return nil
}
