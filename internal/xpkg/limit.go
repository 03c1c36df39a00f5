package xpkg

import (
	"bytes"
	"errors"
	"fmt"
	"io"
)

// MaxDocumentSize is the largest single document of a package.yaml stream
// Parse reads, in bytes: 16 MiB.
//
// Parse holds a document whole while it converts it from YAML to JSON, and
// that conversion peaks at about six times the document's size (a 204 MB
// document took 1.34 GB), so the limit bounds the memory one document can
// take to roughly 100 MiB per parsing worker. The limit is safe for real
// packages: the largest document of the real packages in the test data
// ($LOCKSTEP_TESTDATA/packages) is the
// deliverystreams.firehose.aws.upbound.io CRD of provider-upjet-aws v2.6.0,
// 1,691,237 bytes, a tenth of the limit. And no document much larger could
// be installed anyway: the API server refuses request bodies over 3 MiB and
// etcd values over 1.5 MiB by default (kubernetes/kubernetes
// staging/src/k8s.io/apiserver/pkg/server/config.go, MaxRequestBodyBytes).
// The whole stream is bounded separately by MaxPackageYAMLSize.
const MaxDocumentSize int64 = 16 << 20

// ErrTooLarge means a package.yaml stream, or one of its documents, is larger
// than Parse reads (MaxPackageYAMLSize for the stream, MaxDocumentSize for a
// document). Parse stops reading at the limit, so a small compressed layer
// that expands to gigabytes costs no more memory than the limit.
var ErrTooLarge = errors.New("larger than lockstep parses")

// sizeError is a stream or document over its limit; it matches ErrTooLarge.
type sizeError struct {
	what  string
	limit int64
}

func (e *sizeError) Error() string {
	limit := fmt.Sprintf("%d bytes", e.limit)
	if e.limit >= 1<<20 && e.limit%(1<<20) == 0 {
		limit += fmt.Sprintf(" (%d MiB)", e.limit>>20)
	}
	return fmt.Sprintf("%s is larger than %s, the limit lockstep parses", e.what, limit)
}

func (e *sizeError) Is(target error) bool { return target == ErrTooLarge }

// limitReader passes r through and fails with a *sizeError once the stream
// passes stream bytes or the current document passes doc bytes. A document
// starts after a line beginning with "---": the document separator of
// utilyaml.YAMLReader, which rejects every other line starting with "---" as
// malformed, so no document can grow past the limit unseen.
type limitReader struct {
	r           io.Reader
	stream, doc int64
	total, cur  int64
	// prefix is how many bytes of "---" the current line has matched from
	// its start, or -1 when it cannot be a separator.
	prefix int
	// err is the limit error, returned by every Read once reached:
	// bufio.Reader drops an error it returns with data, and a later Read
	// at the end of the stream would otherwise say io.EOF, turning the
	// refusal into a silently truncated stream.
	err error
}

func newLimitReader(r io.Reader, stream, doc int64) *limitReader {
	return &limitReader{r: r, stream: stream, doc: doc}
}

const separator = "---"

// Read reads from the underlying reader and counts what it returns.
func (l *limitReader) Read(p []byte) (int, error) {
	if l.err != nil {
		return 0, l.err
	}
	n, err := l.r.Read(p)
	for i := 0; i < n; {
		j := i + 1
		switch {
		case p[i] == '\n':
			l.prefix = 0
		case l.prefix >= 0 && l.prefix < len(separator):
			if p[i] != separator[l.prefix] {
				l.prefix = -1
				break
			}
			if l.prefix++; l.prefix == len(separator) {
				l.cur = 0
			}
		default:
			// Not at a line start: only line starts matter, skip to the
			// end of the line.
			if k := bytes.IndexByte(p[i:n], '\n'); k >= 0 {
				j = i + k + 1
				l.prefix = 0
			} else {
				j = n
			}
		}
		l.total += int64(j - i)
		l.cur += int64(j - i)
		if l.total > l.stream {
			l.err = &sizeError{what: StreamFile, limit: l.stream}
			return i, l.err
		}
		if l.cur > l.doc {
			l.err = &sizeError{what: "document", limit: l.doc}
			return i, l.err
		}
		i = j
	}
	return n, err
}
