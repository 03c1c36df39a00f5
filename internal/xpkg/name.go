package xpkg

import "strings"

// dnsLabelMax is the last input index ToDNSLabel reads: a DNS label has at
// most 63 characters.
const dnsLabelMax = 62

// ToDNSLabel turns s into a DNS label the way Crossplane's xpkg.ToDNSLabel
// does (docs/crossplane-behaviour.md#references-and-identity), because Crossplane names the
// packages it installs for dependencies with it and real Compositions refer
// to functions by those names (for example
// crossplane-contrib-function-patch-and-transform):
//
//   - lower-case letters and digits are kept, every other character is
//     dropped, except that
//   - '.', '/', ':' and '-' become '-', unless they are the first byte, the
//     byte at index 62 or the last byte of s;
//   - bytes after index 62 are not read;
//   - leading and trailing '-' are trimmed from the result.
//
// Upper-case letters are dropped, not lowered, as in Crossplane.
func ToDNSLabel(s string) string {
	var b strings.Builder
	for i := 0; i < len(s) && i <= dnsLabelMax; i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9':
			b.WriteByte(c)
		case c == '.' || c == '/' || c == ':' || c == '-':
			if i != 0 && i != dnsLabelMax && i != len(s)-1 {
				b.WriteByte('-')
			}
		}
	}
	return strings.Trim(b.String(), "-")
}
