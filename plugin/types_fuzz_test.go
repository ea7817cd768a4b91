package plugin

import (
	"encoding/json"
	"reflect"
	"testing"
)

type fuzzArgs struct {
	N    int                `json:"n"`
	U    uint8              `json:"u,omitempty"`
	F    float32            `json:"f,omitempty"`
	S    string             `json:"s,omitempty"`
	B    bool               `json:"b,omitempty"`
	L    []int16            `json:"l,omitempty"`
	A    [2]string          `json:"a,omitempty"`
	M    map[string]*int    `json:"m,omitempty"`
	P    *struct{ X int64 } `json:"p"`
	Raw  json.RawMessage    `json:"raw,omitempty"`
	Blob []byte             `json:"blob,omitempty"`
	Any  any                `json:"any,omitempty"`
}

// Whatever JSON the sandbox sends, checking it never panics, and a value
// the check accepts always decodes into the Go type.
func FuzzCheckValue(f *testing.F) {
	for _, seed := range []string{
		`{"n":1}`, `{"n":"1"}`, `{"n":1.5}`, `{"n":1e400}`, `{"n":-9223372036854775809}`,
		`{"n":1,"u":256}`, `{"n":1,"u":-1}`, `{"n":1,"f":3.5e38}`, `{"n":1,"f":1e39}`,
		`{"n":1,"l":[1,70000]}`, `{"n":1,"a":["x"]}`, `{"n":1,"a":["x","y"]}`, `{"n":1,"m":{"k":null}}`,
		`{"n":1,"p":{"X":1}}`, `{"n":1,"p":null}`, `{"n":1,"p":{"X":1,"Y":2}}`, `{"n":1,"blob":"AAEC"}`,
		`{"n":1,"blob":"!!"}`, `{"n":1,"raw":{"deep":[1,{"x":null}]}}`, `[1,2]`, `null`, `"s"`, `{`, ``,
		`{"n":1,"any":[[[[[]]]]]}`, `{"n":1}{"n":2}`,
	} {
		f.Add([]byte(seed))
	}
	typ := reflect.TypeFor[fuzzArgs]()
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := checkValue(typ, data); err != nil {
			return
		}
		var v fuzzArgs
		if err := json.Unmarshal(data, &v); err != nil {
			t.Fatalf("checkValue accepted %q but json.Unmarshal fails: %v", data, err)
		}
	})
}
