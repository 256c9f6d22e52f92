package session

import (
	"errors"
	"strings"
)

// MaxMemoryKeyLen bounds a memory key.
const MaxMemoryKeyLen = 128

// Problems with a memory key, as ValidateMemoryKey returns them.
var (
	errMemoryKeyChars = errors.New("must be 1 to 128 characters of A-Z a-z 0-9 . _ - /")
	errMemoryKeyPath  = errors.New(`must be segments of A-Z a-z 0-9 . _ - joined by "/", ` +
		`none of them empty, "." or ".." (a URL would not keep the key as it is)`)
)

// ValidateMemoryKey checks that key is a plain memory key: 1 to 128
// characters of [A-Za-z0-9._-/] making segments separated by "/", none of
// them empty, "." or "..". A key is a URL path's tail
// (/sessions/{id}/memory/{key}), and clients and proxies remove dot
// segments and often merge slashes before a request leaves them: "a/../b"
// would be sent as "b", "a//b" as "a/b". So such keys are refused rather
// than stored where no URL reaches them.
func ValidateMemoryKey(key string) error {
	if key == "" || len(key) > MaxMemoryKeyLen {
		return errMemoryKeyChars
	}
	for i := range len(key) {
		if c := key[i]; !isBase62(c) && c != '.' && c != '_' && c != '-' && c != '/' {
			return errMemoryKeyChars
		}
	}
	for seg := range strings.SplitSeq(key, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return errMemoryKeyPath
		}
	}
	return nil
}
