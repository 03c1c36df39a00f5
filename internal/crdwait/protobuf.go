package crdwait

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"google.golang.org/protobuf/encoding/protowire"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// acceptWatch is the Accept header of the watch: Kubernetes' protobuf
// encoding first, JSON where a server (or a proxy before it) offers no
// protobuf. kube-apiserver encodes a CRD in protobuf with generated code,
// several times faster than the reflection its JSON encoder walks the
// schema with, and the tracker skips the encoded spec without reading it.
// https://kubernetes.io/docs/reference/using-api/api-concepts/#protobuf-encoding
const acceptWatch = "application/vnd.kubernetes.protobuf, application/json"

// protobufMagic prefixes an object encoded in Kubernetes' protobuf
// encoding: the bytes "k8s" and 0, then a runtime.Unknown that holds the
// object's kind and its bytes
// (k8s.io/apimachinery/pkg/runtime/serializer/protobuf/protobuf.go).
var protobufMagic = []byte{0x6b, 0x38, 0x73, 0x00}

// maxWatchFrame bounds one protobuf watch frame, in bytes: 16 MiB, ten
// times etcd's default request limit (1.5 MiB), which bounds every object
// kube-apiserver stores.
const maxWatchFrame = 16<<20 - 1

// eventReader reads the events of one watch stream.
type eventReader interface {
	next(ev *crdEvent) error
}

// newEventReader returns the reader of the watch stream body in the
// encoding its first byte shows: a protobuf stream starts with the 4-byte
// big-endian length of its first frame, whose first byte is 0 for any
// frame under maxWatchFrame; a JSON stream starts with '{'.
func newEventReader(body io.Reader) eventReader {
	br := bufio.NewReaderSize(body, 32<<10)
	if b, err := br.Peek(1); err == nil && b[0] == 0 {
		return &protobufEvents{r: br}
	}
	return jsonEvents{dec: json.NewDecoder(br)}
}

// jsonEvents reads a watch stream in JSON: one event object after the
// other.
type jsonEvents struct {
	dec *json.Decoder
}

// next decodes the next event into ev; io.EOF at the end of the stream.
func (j jsonEvents) next(ev *crdEvent) error {
	*ev = crdEvent{}
	return j.dec.Decode(ev)
}

// protobufEvents reads a watch stream in Kubernetes' protobuf encoding: a
// sequence of frames, each a 4-byte big-endian length then a
// metav1.WatchEvent, whose object holds protobufMagic and a
// runtime.Unknown.
type protobufEvents struct {
	r   io.Reader
	buf []byte
}

// next decodes the next event into ev; io.EOF at the end of the stream.
func (p *protobufEvents) next(ev *crdEvent) error {
	var size [4]byte
	if _, err := io.ReadFull(p.r, size[:]); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return fmt.Errorf("watch frame: %w", err)
		}
		return err
	}
	n := binary.BigEndian.Uint32(size[:])
	if n > maxWatchFrame {
		return fmt.Errorf("watch frame of %d bytes, more than %d", n, maxWatchFrame)
	}
	if cap(p.buf) < int(n) {
		p.buf = make([]byte, n)
	}
	p.buf = p.buf[:n]
	if _, err := io.ReadFull(p.r, p.buf); err != nil {
		return fmt.Errorf("watch frame: %w", io.ErrUnexpectedEOF)
	}
	return decodeProtobufEvent(p.buf, ev)
}

// decodeProtobufEvent decodes the watch event frame into ev: its type, and
// for a CustomResourceDefinition its name, resourceVersion and conditions,
// or for a metav1.Status (an ERROR event) its message and code. It reads
// the envelopes in place and skips the CRD's spec, which holds its
// schemas, undecoded; the generated decoders of the Kubernetes API types
// decode the CRD's status and the Status. Field numbers are those of
// k8s.io/apimachinery/pkg/apis/meta/v1/generated.proto (WatchEvent,
// ObjectMeta, Status), k8s.io/apimachinery/pkg/runtime/generated.proto
// (RawExtension, Unknown, TypeMeta) and
// k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1/generated.proto
// (CustomResourceDefinition).
func decodeProtobufEvent(frame []byte, ev *crdEvent) error {
	*ev = crdEvent{}
	kind, object, err := unwrapEvent(frame, ev)
	if err != nil {
		return err
	}
	o := &ev.Object
	if kind == "Status" {
		var s metav1.Status
		if err := s.Unmarshal(object); err != nil {
			return fmt.Errorf("watch event %s: Status: %w", ev.Type, err)
		}
		o.Message, o.Code = s.Message, int(s.Code)
		return nil
	}
	// CustomResourceDefinition: metadata is field 1, spec 2, status 3.
	err = eachField(object, func(num protowire.Number, v []byte) error {
		switch num {
		case 1:
			return eachField(v, func(num protowire.Number, v []byte) error {
				switch num {
				case 1: // ObjectMeta.name
					o.Metadata.Name = string(v)
				case 6: // ObjectMeta.resourceVersion
					o.Metadata.ResourceVersion = string(v)
				}
				return nil
			})
		case 3:
			var s apiextensionsv1.CustomResourceDefinitionStatus
			if err := s.Unmarshal(v); err != nil {
				return err
			}
			for _, c := range s.Conditions {
				o.Status.Conditions = append(o.Status.Conditions, condition{
					Type: string(c.Type), Status: string(c.Status), Reason: c.Reason, Message: c.Message,
				})
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("watch event %s: CustomResourceDefinition %s: %w", ev.Type, o.Metadata.Name, err)
	}
	return nil
}

// unwrapEvent reads the envelopes of the watch event frame in place: it
// sets ev.Type from the WatchEvent and returns the kind and the bytes of
// the object its runtime.Unknown holds.
func unwrapEvent(frame []byte, ev *crdEvent) (kind string, object []byte, err error) {
	err = eachField(frame, func(num protowire.Number, v []byte) error {
		switch num {
		case 1: // WatchEvent.type
			ev.Type = string(v)
		case 2: // WatchEvent.object, a RawExtension: raw is field 1
			return eachField(v, func(num protowire.Number, v []byte) error {
				if num == 1 {
					object = v
				}
				return nil
			})
		}
		return nil
	})
	if err != nil {
		return "", nil, fmt.Errorf("watch event: %w", err)
	}
	raw, ok := bytes.CutPrefix(object, protobufMagic)
	if !ok {
		return "", nil, fmt.Errorf("watch event %s: object is not in Kubernetes' protobuf encoding", ev.Type)
	}
	object = nil
	err = eachField(raw, func(num protowire.Number, v []byte) error {
		switch num {
		case 1: // Unknown.typeMeta: kind is field 2
			return eachField(v, func(num protowire.Number, v []byte) error {
				if num == 2 {
					kind = string(v)
				}
				return nil
			})
		case 2: // Unknown.raw
			object = v
		}
		return nil
	})
	if err != nil {
		return "", nil, fmt.Errorf("watch event %s: %w", ev.Type, err)
	}
	return kind, object, nil
}

// eachField calls f with the number and bytes of each length-delimited
// field of the protobuf message b, in order, skipping fields of other wire
// types; it returns f's first error, or an error when b does not parse.
func eachField(b []byte, f func(num protowire.Number, v []byte) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("protobuf: %w", protowire.ParseError(n))
		}
		b = b[n:]
		if typ != protowire.BytesType {
			if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
				return fmt.Errorf("protobuf: field %d: %w", num, protowire.ParseError(n))
			}
			b = b[n:]
			continue
		}
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return fmt.Errorf("protobuf: field %d: %w", num, protowire.ParseError(n))
		}
		b = b[n:]
		if err := f(num, v); err != nil {
			return err
		}
	}
	return nil
}
