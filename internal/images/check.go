package images

import (
	"fmt"
	"net/url"
	"strings"
	"unicode"
)

// Check reports what is wrong with in as a client would want to hear it,
// a phrase about the image ("is 5000000 bytes; …") for the caller to put
// after the name of the part, or nil. Bytes must be of an allowed media
// type, within MaxBytes, and be what their media type says; a URL must be
// http or https, within MaxURLLength, with an allowed media type if any.
func (l *Library) Check(in Input) error {
	switch {
	case in.URL != "" && in.Data != nil:
		return invalid("has both bytes and a URL")
	case in.URL != "":
		return l.checkURL(in)
	case len(in.Data) == 0:
		return invalid("has no bytes")
	case !allowedType(in.MediaType):
		return invalid(fmt.Sprintf("is %s; images may be %s", typeName(in.MediaType), strings.Join(mediaTypes, ", ")))
	case int64(len(in.Data)) > l.limits.MaxBytes:
		return l.tooLarge(int64(len(in.Data)))
	}
	if got := sniff(in.Data); got != in.MediaType {
		return invalid(fmt.Sprintf("says %s but its bytes are %s", in.MediaType, typeName(got)))
	}
	return nil
}

// CheckCount reports whether a message may carry n images.
func (l *Library) CheckCount(n int) error {
	if n > l.limits.MaxPerMessage {
		return invalid(fmt.Sprintf("has %d images; a message may carry at most %d", n, l.limits.MaxPerMessage))
	}
	return nil
}

// checkURL checks an image given by URL.
func (l *Library) checkURL(in Input) error {
	if len(in.URL) > l.limits.MaxURLLength {
		return invalid(fmt.Sprintf("has a URL of %d bytes; at most %d are allowed", len(in.URL), l.limits.MaxURLLength))
	}
	if in.MediaType != "" && !allowedType(in.MediaType) {
		return invalid(fmt.Sprintf("is %s; images may be %s", in.MediaType, strings.Join(mediaTypes, ", ")))
	}
	u, err := url.Parse(in.URL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || strings.IndexFunc(in.URL, unicode.IsSpace) >= 0 {
		return invalid("has a URL that is not an absolute http or https URL")
	}
	return nil
}

// typeName names a media type in a problem.
func typeName(mt string) string {
	if mt == "" {
		return "of no known image type"
	}
	return mt
}

// signatures are the first bytes of each allowed media type, as the
// WHATWG MIME Sniffing standard matches images ("?" matches any byte).
var signatures = []struct {
	mediaType string
	prefix    string
}{
	{"image/png", "\x89PNG\r\n\x1a\n"},
	{"image/jpeg", "\xff\xd8\xff"},
	{"image/gif", "GIF87a"},
	{"image/gif", "GIF89a"},
	{"image/webp", "RIFF????WEBPVP"},
}

// sniff returns the allowed media type data starts like, or "".
func sniff(data []byte) string {
	for _, sig := range signatures {
		if matches(data, sig.prefix) {
			return sig.mediaType
		}
	}
	return ""
}

func matches(data []byte, pattern string) bool {
	if len(data) < len(pattern) {
		return false
	}
	for i := range len(pattern) {
		if pattern[i] != '?' && data[i] != pattern[i] {
			return false
		}
	}
	return true
}
