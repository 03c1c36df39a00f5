package certs

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestValid(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ca, err := New(now)
	if err != nil {
		t.Fatal(err)
	}
	other, err := New(now)
	if err != nil {
		t.Fatal(err)
	}
	server := &TLSRequest{DNSNames: []string{"svc", "svc.ns"}}
	issued, err := ca.Issue(server, now)
	if err != nil {
		t.Fatal(err)
	}
	reparsed, err := Parse(ca.CertPEM(), ca.KeyPEM())
	if err != nil {
		t.Fatalf("Parse(New()): %v", err)
	}

	cases := map[string]struct {
		reason string
		data   map[string][]byte
		req    *TLSRequest
		at     time.Time
		ca     *CA
		want   bool
	}{
		"Fresh": {
			reason: "a certificate just issued for the request is valid",
			data:   issued, req: server, at: now, ca: ca, want: true,
		},
		"ParsedCA": {
			reason: "the CA read back from its Secret's PEM is the same CA",
			data:   issued, req: server, at: now, ca: reparsed, want: true,
		},
		"UnknownCA": {
			reason: "without a known CA the chain to ca.crt is enough",
			data:   issued, req: server, at: now, want: true,
		},
		"OtherCA": {
			reason: "a certificate of another CA than the root CA is replaced",
			data:   issued, req: server, at: now, ca: other,
		},
		"DNSNamesChanged": {
			reason: "a certificate whose DNS names differ from the request is replaced",
			data:   issued, req: &TLSRequest{DNSNames: []string{"svc"}}, at: now, ca: ca,
		},
		"UsageChanged": {
			reason: "a server certificate does not satisfy a client request",
			data:   issued, req: &TLSRequest{DNSNames: server.DNSNames, Usage: TLSClient}, at: now, ca: ca,
		},
		"Expiring": {
			reason: "a certificate that expires within certRenewBefore is replaced",
			data:   issued, req: server, at: now.Add(certValidity - certRenewBefore/2), ca: ca,
		},
		"Empty": {
			reason: "a Secret without the three keys is not valid",
			data:   map[string][]byte{TLSCertKey: issued[TLSCertKey]}, req: server, at: now, ca: ca,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Valid(tc.data, tc.req, tc.at, tc.ca)); diff != "" {
				t.Errorf("%s\nValid(): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestParse(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ca, err := New(now)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := ca.Issue(&TLSRequest{DNSNames: []string{"svc"}}, now)
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		reason  string
		crt     []byte
		key     []byte
		wantErr bool
	}{
		"Generated": {reason: "a CA New generated parses", crt: ca.CertPEM(), key: ca.KeyPEM()},
		"Empty":     {reason: "an empty key is an error", crt: ca.CertPEM(), wantErr: true},
		"NotCA":     {reason: "a leaf certificate is not a CA", crt: leaf[TLSCertKey], key: leaf[TLSKeyKey], wantErr: true},
		"Mismatch":  {reason: "a key of another certificate is an error", crt: ca.CertPEM(), key: leaf[TLSKeyKey], wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Parse(tc.crt, tc.key)
			if diff := cmp.Diff(tc.wantErr, err != nil); diff != "" {
				t.Errorf("%s\nParse() error %v: -want, +got:\n%s", tc.reason, err, diff)
			}
		})
	}
}
