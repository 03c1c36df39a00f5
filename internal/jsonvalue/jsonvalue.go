// Package jsonvalue compares values decoded from JSON (unstructured
// objects, status fields, Lock entries) by what they mean rather than by
// their Go types: a number decoded as int64 equals the same number built
// as an int or float64, and an empty list equals an absent one, as the
// API server, which omits empty lists, hands them back.
package jsonvalue

import (
	"encoding/json"
	"reflect"
)

// Normalize returns a copy of v with every number a float64 and every
// empty list nil, at any depth; maps and lists are copied, v is not
// modified.
func Normalize(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			out[k] = Normalize(e)
		}
		return out
	case []any:
		if len(t) == 0 {
			return nil
		}
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = Normalize(e)
		}
		return out
	}
	if n, ok := Number(v); ok {
		return n
	}
	return v
}

// Equal reports whether a and b are the same JSON value (Normalize).
func Equal(a, b any) bool {
	return reflect.DeepEqual(Normalize(a), Normalize(b))
}

// Number returns v as a float64 when it is a number of a type a JSON
// decoder or an object builder gives (int, int32, int64, float64,
// json.Number), and false otherwise.
func Number(v any) (float64, bool) {
	switch n := v.(type) {
	case int64:
		return float64(n), true
	case int:
		return float64(n), true
	case int32:
		return float64(n), true
	case float64:
		return n, true
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	}
	return 0, false
}
