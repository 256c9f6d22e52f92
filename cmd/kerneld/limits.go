package main

import (
	"log/slog"
	"math"
)

// Connection planning. Every open connection takes a file descriptor, and
// so do the store, the MCP servers' pipes and a refused connection while
// it is answered 503; so the cap on connections sits below the descriptor
// limit by a reserve, half of which may answer refused connections.
const (
	minFileReserve       = 64   // descriptors kept from connections at the least
	fileReserveDivisor   = 10   // and at least a tenth of the limit
	unknownLimitMaxConns = 4096 // the cap when the descriptor limit is unknown
	metricsMaxConns      = 16   // the metrics listener's own cap (a scraper keeps one)
)

// connPlan is how many connections and streams kerneld serves at once.
type connPlan struct {
	fileLimit   uint64 // RLIMIT_NOFILE in force; 0 when unknown
	maxConns    int
	maxRefusing int
	maxStreams  int
	lowered     bool // http.max_connections was more than the limit allows
}

// planConnections derives the caps from the config and the descriptor
// limit: max_connections 0 takes the limit less the reserve, a larger
// value is lowered to it, and max_streams 0 takes half the connections,
// so that streams cannot hold every connection request/response clients
// need.
func planConnections(h HTTPConfig, fileLimit uint64) connPlan {
	p := connPlan{fileLimit: fileLimit, maxConns: h.MaxConnections, maxRefusing: minFileReserve / 2}
	if fileLimit > 0 {
		limit := int(min(fileLimit, math.MaxInt32))
		reserve := max(minFileReserve, limit/fileReserveDivisor)
		ceiling := max(limit-reserve, limit/2)
		p.maxRefusing = max(1, (limit-ceiling)/2)
		if p.maxConns == 0 || p.maxConns > ceiling {
			p.lowered = p.maxConns > ceiling
			p.maxConns = ceiling
		}
	} else if p.maxConns == 0 {
		p.maxConns = unknownLimitMaxConns
	}
	p.maxStreams = h.MaxStreams
	if p.maxStreams == 0 {
		p.maxStreams = max(1, p.maxConns/2)
	}
	return p
}

// logConnectionPlan logs the descriptor limit and the caps derived from
// it, once at start.
func logConnectionPlan(log *slog.Logger, h HTTPConfig, p connPlan, limitErr error) {
	if limitErr != nil {
		log.Warn("raise the descriptor limit", "err", limitErr)
	}
	if p.lowered {
		log.Warn("http.max_connections lowered to fit the descriptor limit", "configured", h.MaxConnections,
			"max_connections", p.maxConns, "file_limit", p.fileLimit)
	}
	log.Info("connection limits", "file_limit", p.fileLimit, "max_connections", p.maxConns,
		"max_connections_per_address", h.MaxConnectionsPerAddress, "trusted_proxies", len(h.TrustedProxies),
		"max_streams", p.maxStreams, "max_streams_per_tenant", h.MaxStreamsPerTenant,
		"idle_timeout", h.IdleTimeout, "read_timeout", h.ReadTimeout, "read_header_timeout", h.ReadHeaderTimeout,
		"first_request_timeout", h.FirstRequestTimeout, "min_body_rate", h.MinBodyRate)
}
