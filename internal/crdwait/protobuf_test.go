package crdwait

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"

	"github.com/lockstep-gitops/lockstep/test/envtest"
)

// protobufFrames encodes events as kube-apiserver writes a protobuf watch
// stream: each object with the protobuf serializer (magic and
// runtime.Unknown), inside a metav1.WatchEvent, in length-delimited frames.
func protobufFrames(t testing.TB, events ...metav1.WatchEvent) []byte {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	metav1.AddToGroupVersion(scheme, metav1.SchemeGroupVersion)
	s := protobuf.NewSerializer(scheme, scheme)
	var out bytes.Buffer
	fw := protobuf.LengthDelimitedFramer.NewFrameWriter(&out)
	for _, ev := range events {
		var obj bytes.Buffer
		if err := s.Encode(ev.Object.Object, &obj); err != nil {
			t.Fatal(err)
		}
		ev.Object = runtime.RawExtension{Raw: obj.Bytes()}
		b, err := ev.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := fw.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	return out.Bytes()
}

// bigCRD returns a CRD named name whose spec holds a schema of many
// properties, as a provider's CRDs do, with the given conditions.
func bigCRD(name, rv string, conds ...apiextensionsv1.CustomResourceDefinitionCondition) *apiextensionsv1.CustomResourceDefinition {
	c := establishCRD("example.org", strings.Split(name, ".")[0], "Widget", "x")
	c.Name, c.ResourceVersion = name, rv
	c.TypeMeta = metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition"}
	props := map[string]apiextensionsv1.JSONSchemaProps{}
	for i := range 200 {
		props[strings.Repeat("p", i%20+1)+string(rune('a'+i%26))] = apiextensionsv1.JSONSchemaProps{Type: "string", Description: strings.Repeat("words ", 20)}
	}
	c.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties = props
	c.Status.Conditions = conds
	return c
}

func TestProtobufEvents(t *testing.T) {
	established := apiextensionsv1.CustomResourceDefinitionCondition{Type: apiextensionsv1.Established, Status: apiextensionsv1.ConditionTrue, Reason: "InitialNamesAccepted", Message: "the initial names have been accepted"}
	conflict := apiextensionsv1.CustomResourceDefinitionCondition{Type: apiextensionsv1.NamesAccepted, Status: apiextensionsv1.ConditionFalse, Reason: "KindConflict", Message: "Widget is already in use"}
	bookmark := &apiextensionsv1.CustomResourceDefinition{TypeMeta: metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition"}, ObjectMeta: metav1.ObjectMeta{ResourceVersion: "99"}}
	gone := &metav1.Status{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Status"}, Status: metav1.StatusFailure, Message: "too old resource version: 5 (42)", Code: 410}

	stream := protobufFrames(t,
		metav1.WatchEvent{Type: "ADDED", Object: runtime.RawExtension{Object: bigCRD("widgets.example.org", "40")}},
		metav1.WatchEvent{Type: "MODIFIED", Object: runtime.RawExtension{Object: bigCRD("widgets.example.org", "41", established)}},
		metav1.WatchEvent{Type: "MODIFIED", Object: runtime.RawExtension{Object: bigCRD("gadgets.example.org", "42", conflict)}},
		metav1.WatchEvent{Type: "BOOKMARK", Object: runtime.RawExtension{Object: bookmark}},
		metav1.WatchEvent{Type: "ERROR", Object: runtime.RawExtension{Object: gone}},
	)
	type got struct {
		Type, Name, RV, Message string
		Code                    int
		State                   State
	}
	want := []got{
		{Type: "ADDED", Name: "widgets.example.org", RV: "40", State: State{ResourceVersion: 40}},
		{Type: "MODIFIED", Name: "widgets.example.org", RV: "41", State: State{ResourceVersion: 41, Established: true}},
		{Type: "MODIFIED", Name: "gadgets.example.org", RV: "42", State: State{ResourceVersion: 42, NotAccepted: "KindConflict: Widget is already in use"}},
		{Type: "BOOKMARK", RV: "99", State: State{ResourceVersion: 99}},
		{Type: "ERROR", Message: gone.Message, Code: 410},
	}
	r := newEventReader(bytes.NewReader(stream))
	if _, ok := r.(*protobufEvents); !ok {
		t.Fatalf("a protobuf stream was read as %T", r)
	}
	var out []got
	for {
		var ev crdEvent
		err := r.next(&ev)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		g := got{Type: ev.Type, Name: ev.Object.Metadata.Name, RV: ev.Object.Metadata.ResourceVersion, Message: ev.Object.Message, Code: ev.Object.Code}
		if ev.Type != "ERROR" {
			g.State = stateOf(&ev)
		}
		out = append(out, g)
	}
	if diff := cmp.Diff(want, out); diff != "" {
		t.Errorf("events of a protobuf watch stream (-want +got):\n%s", diff)
	}
}

func TestProtobufEventErrors(t *testing.T) {
	frame := protobufFrames(t, metav1.WatchEvent{Type: "ADDED", Object: runtime.RawExtension{Object: bigCRD("widgets.example.org", "40")}})
	cases := []struct {
		name, reason string
		stream       []byte
		want         string
	}{
		{name: "Truncated", reason: "a frame cut short is an error, not the end of the stream", stream: frame[:len(frame)-10], want: "watch frame: unexpected EOF"},
		{name: "TruncatedLength", reason: "a length cut short is an error", stream: frame[:2], want: "watch frame: unexpected EOF"},
		{name: "TooLarge", reason: "a frame over the bound is refused before it is read", stream: []byte{1, 0, 0, 0, 1}, want: "watch frame of 16777216 bytes"},
		{name: "NoMagic", reason: "an object not in Kubernetes' protobuf encoding is refused", stream: func() []byte {
			b, _ := (&metav1.WatchEvent{Type: "ADDED", Object: runtime.RawExtension{Raw: []byte(`{"kind":"x"}`)}}).Marshal()
			return append([]byte{0, 0, 0, byte(len(b))}, b...)
		}(), want: "not in Kubernetes' protobuf encoding"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := &protobufEvents{r: bytes.NewReader(tc.stream)}
			var ev crdEvent
			err := r.next(&ev)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: got %v, want an error containing %q", tc.reason, err, tc.want)
			}
		})
	}
}

// FuzzProtobufEvent checks that no input makes the decoder of a watch
// event panic.
func FuzzProtobufEvent(f *testing.F) {
	stream := protobufFrames(f, metav1.WatchEvent{Type: "ADDED", Object: runtime.RawExtension{Object: bigCRD("widgets.example.org", "40")}})
	f.Add(stream[4:])
	f.Add([]byte{})
	f.Fuzz(func(_ *testing.T, b []byte) {
		var ev crdEvent
		_ = decodeProtobufEvent(b, &ev)
	})
}

// BenchmarkWatchDecode decodes the same events of large CRDs from a
// protobuf and from a JSON watch stream.
func BenchmarkWatchDecode(b *testing.B) {
	var events []metav1.WatchEvent
	for i := range 50 {
		events = append(events, metav1.WatchEvent{Type: "MODIFIED", Object: runtime.RawExtension{Object: bigCRD("widgets.example.org", "4"+strings.Repeat("0", i%5+1))}})
	}
	pb := protobufFrames(b, events...)
	var js bytes.Buffer
	for _, ev := range events {
		raw, err := json.Marshal(ev.Object.Object)
		if err != nil {
			b.Fatal(err)
		}
		ev.Object = runtime.RawExtension{Raw: raw}
		if err := json.NewEncoder(&js).Encode(ev); err != nil {
			b.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name   string
		stream []byte
	}{{"Protobuf", pb}, {"JSON", js.Bytes()}} {
		b.Run(tc.name, func(b *testing.B) {
			b.SetBytes(int64(len(tc.stream)))
			for b.Loop() {
				r := newEventReader(bytes.NewReader(tc.stream))
				var ev crdEvent
				n := 0
				for r.next(&ev) == nil {
					n++
				}
				if n != len(events) {
					b.Fatalf("read %d events, want %d", n, len(events))
				}
			}
		})
	}
}

// BenchmarkWatchServer opens the tracker's watch on 200 CRDs with large
// schemas and reads the event of each, in protobuf and in JSON, and
// reports the CPU kube-apiserver and etcd spent per watch (server-ms/op)
// beside the wall time, which includes the tracker's decoding.
func BenchmarkWatchServer(b *testing.B) {
	env := envtest.Shared(b)
	ctx := context.Background()
	n := establishSeq.Add(1)
	instance := fmt.Sprintf("watchbench-%d", n)
	const crds = 200
	for i := range crds {
		c := bigCRD(fmt.Sprintf("widgets%d.wb%d.example.org", i, n), "")
		c.Spec.Group = fmt.Sprintf("wb%d.example.org", n)
		c.Spec.Names = apiextensionsv1.CustomResourceDefinitionNames{Plural: fmt.Sprintf("widgets%d", i), Kind: fmt.Sprintf("Widget%d", i), ListKind: fmt.Sprintf("Widget%dList", i), Singular: fmt.Sprintf("widget%d", i)}
		c.Labels = map[string]string{testLabel: instance}
		c.TypeMeta, c.ResourceVersion = metav1.TypeMeta{}, ""
		if err := env.Client.Create(ctx, c); err != nil {
			b.Fatal(err)
		}
	}
	rc, err := NewRESTClient(env.Config)
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct{ name, accept string }{{"Protobuf", acceptWatch}, {"JSON", "application/json"}} {
		b.Run(tc.name, func(b *testing.B) {
			w := NewWatcher(rc)
			w.accept = tc.accept
			cpu0 := envtest.ChildCPU(b)
			for b.Loop() {
				tr := w.Track(Selector{Labels: map[string]string{testLabel: instance}})
				var want []Want
				for i := range crds {
					want = append(want, Want{Name: fmt.Sprintf("widgets%d.wb%d.example.org", i, n)})
				}
				if err := tr.Wait(ctx, want, time.Minute); err != nil {
					b.Fatal(err)
				}
				tr.Stop()
			}
			b.ReportMetric(float64((envtest.ChildCPU(b)-cpu0).Milliseconds())/float64(b.N), "server-ms/op")
		})
	}
}
