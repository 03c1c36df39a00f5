package jsonvalue

import (
	"encoding/json"
	"testing"
)

func TestEqual(t *testing.T) {
	cases := map[string]struct {
		reason string
		a, b   any
		want   bool
	}{
		"NumberTypes": {
			reason: "A decoded int64 equals a built int, float64 and json.Number of the same value.",
			a:      map[string]any{"n": int64(3), "m": []any{int(1)}}, b: map[string]any{"n": float64(3), "m": []any{json.Number("1")}}, want: true,
		},
		"EmptyList": {
			reason: "An empty list equals none, at any depth.",
			a:      []any{map[string]any{"dependencies": []any{}}}, b: []any{map[string]any{"dependencies": nil}}, want: true,
		},
		"OtherValue": {
			reason: "Different values differ.",
			a:      map[string]any{"version": "v1"}, b: map[string]any{"version": "v2"},
		},
		"OtherNumber": {
			reason: "Different numbers differ.",
			a:      int64(1), b: float64(2),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := Equal(tc.a, tc.b); got != tc.want {
				t.Errorf("%s\nEqual(%v, %v): got %v, want %v", tc.reason, tc.a, tc.b, got, tc.want)
			}
		})
	}
}

func TestNormalizeLeavesInput(t *testing.T) {
	in := map[string]any{"l": []any{int64(1)}}
	Normalize(in)
	if _, ok := in["l"].([]any)[0].(int64); !ok {
		t.Errorf("Normalize modified its input: %v", in)
	}
}
