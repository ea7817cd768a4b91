package pyplugin

import (
	"bytes"
	"encoding/json"
	"testing"
)

// The hand-written request line is json.Marshal's, byte for byte.
func TestAppendRequestIsMarshal(t *testing.T) {
	id := int64(1099511627776)
	args, _ := json.Marshal(callBody{Method: "add", Args: map[string]json.RawMessage{"a": json.RawMessage(`1`), "s": json.RawMessage(`"<x>\u2028"`)},
		Ctx: callCtx{ChatKey: "onebot_v11-group_1"}})
	for _, m := range []message{
		{ID: &id, Op: "call", Call: "Q5ZKXH7Q2W4ZC7Y3HXOJDRXGZ4", Args: args},
		{ID: &id, Op: "cleanup"},
		{ID: &id, Op: "reset", Args: json.RawMessage(`{"chat_key":"c1"}`)},
	} {
		want, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := appendRequest(nil, m)
		if !ok || !bytes.Equal(got, want) {
			t.Errorf("appendRequest = %s, %v; json.Marshal = %s", got, ok, want)
		}
	}
	for _, m := range []message{
		{Req: &id, Result: json.RawMessage(`1`)},
		{ID: &id, Op: "call", Call: `to"ken`},
		{ID: &id, Op: "log", Level: "info", Msg: "x"},
	} {
		if got, ok := appendRequest(nil, m); ok {
			t.Errorf("appendRequest(%+v) = %s, want json.Marshal's way", m, got)
		}
	}
}

// parseAnswer reads what json.Unmarshal reads, or leaves the line to it.
func TestParseAnswer(t *testing.T) {
	for _, line := range []string{
		`{"id":7,"result":12}`,
		`{"id":7,"result":{"a":[1,"}"]}}`,
		`{"id":0,"result":null}`,
		`{"id":9223372036854775807,"result":"x"}`,
	} {
		var got, want message
		if !parseAnswer([]byte(line), &got) {
			t.Errorf("parseAnswer(%s) left it to json.Unmarshal", line)
			continue
		}
		if err := json.Unmarshal([]byte(line), &want); err != nil {
			t.Fatal(err)
		}
		if *got.ID != *want.ID || !bytes.Equal(got.Result, want.Result) {
			t.Errorf("parseAnswer(%s) = %d %s, want %d %s", line, *got.ID, got.Result, *want.ID, want.Result)
		}
	}
	for _, line := range []string{
		`{"id":7,"error":{"type":"plugin","message":"x"}}`,
		`{"id":7,"result":1,"error":"x"}`,
		`{"id":07,"result":1}`,
		`{"id":99999999999999999999,"result":1}`,
		`{"id":7,"result":}`,
		`{"req":7,"result":1}`,
		`{"id":7,"result":[1}`,
	} {
		var m message
		if parseAnswer([]byte(line), &m) {
			t.Errorf("parseAnswer(%s) read it (id %d, result %s)", line, *m.ID, m.Result)
		}
	}
}
