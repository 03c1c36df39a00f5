package main

import "testing"

func TestParseCacheMax(t *testing.T) {
	cases := map[string]struct {
		reason string
		in     string
		want   int64
		err    bool
	}{
		"Empty":    {reason: "No value is no bound.", in: "", want: 0},
		"Mebibyte": {reason: "A binary quantity is bytes.", in: "1536Mi", want: 1536 << 20},
		"Decimal":  {reason: "A decimal quantity is bytes.", in: "2G", want: 2_000_000_000},
		"Negative": {reason: "A negative size is refused.", in: "-1Gi", err: true},
		"Garbage":  {reason: "A value that is no quantity is refused.", in: "big", err: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := parseCacheMax(tc.in)
			if (err != nil) != tc.err || got != tc.want {
				t.Errorf("%s\nparseCacheMax(%q) = %d, %v; want %d, error %t", tc.reason, tc.in, got, err, tc.want, tc.err)
			}
		})
	}
}
