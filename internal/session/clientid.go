package session

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"strings"
)

// MaxClientIDLen bounds a session id a client chooses.
const MaxClientIDLen = 128

// clientKeySep separates a client's id from its tenant's tag in the key a
// client-chosen session is stored under. Client ids cannot contain it.
const clientKeySep = '~'

// ClientIDRule says what ValidClientID accepts, for problems to quote.
const ClientIDRule = `1 to 128 characters of [A-Za-z0-9._:-], other than "." and ".."`

// ValidClientID reports whether id may be chosen by a client for a
// session (or a run or message on the AG-UI route): 1 to 128 characters
// of [A-Za-z0-9._:-]. "." and ".." are path segments every URL resolver
// removes, so a session by that name could not be addressed.
func ValidClientID(id string) bool {
	if id == "" || len(id) > MaxClientIDLen || id == "." || id == ".." {
		return false
	}
	for i := range len(id) {
		c := id[i]
		if !isBase62(c) && c != '.' && c != '_' && c != ':' && c != '-' {
			return false
		}
	}
	return true
}

// ClientKey returns the key a session whose id a client of tenant chose is
// stored under: the id, then '~' and a tag of the tenant. Ids are unique
// within a tenant, so two tenants choosing one id get two sessions, and
// replicas creating the same id at once race for one key. Clients never
// see the key: PublicID turns it back into their id.
func ClientKey(tenant, clientID string) string {
	return clientID + string(clientKeySep) + tenantTag(tenant)
}

// tenantTag is a short fixed-length digest of a tenant's name.
func tenantTag(tenant string) string {
	sum := sha256.Sum256([]byte(tenant))
	return hex.EncodeToString(sum[:8])
}

// IsClientKey reports whether key is a ClientKey of tenant.
func IsClientKey(key, tenant string) bool {
	i := strings.LastIndexByte(key, clientKeySep)
	return i > 0 && key[i+1:] == tenantTag(tenant)
}

// PublicID returns the id clients know a session by, given the key it is
// stored under: a client's own id for a ClientKey, else the key itself.
func PublicID(key string) string {
	if i := strings.LastIndexByte(key, clientKeySep); i >= 0 {
		return key[:i]
	}
	return key
}

// KeyedID returns the id of the session a tenant creates with an
// Idempotency-Key: an id of NewID's form derived from both, so a retried
// creation, on any replica, finds the session the first one made.
func KeyedID(tenant, idempotencyKey string) string {
	h := sha256.New()
	h.Write([]byte(tenant))
	h.Write([]byte{0})
	h.Write([]byte(idempotencyKey))
	sum := h.Sum(nil)
	return encode62(binary.BigEndian.Uint64(sum[:8]), binary.BigEndian.Uint64(sum[8:16]), IDLen)
}
