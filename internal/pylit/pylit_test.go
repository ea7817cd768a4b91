package pylit

import "testing"

func TestFromJSON(t *testing.T) {
	for in, want := range map[string]string{
		`null`:                             `None`,
		`true`:                             `True`,
		`[false, 1.5, "a\"b"]`:             `[False, 1.5, "a\"b"]`,
		`12345678901234567890`:             `12345678901234567890`, // no float rounding
		`{"b": {"y": 1, "x": 2}, "a": []}`: `{"a": [], "b": {"x": 2, "y": 1}}`,
	} {
		if got, err := FromJSON([]byte(in)); err != nil || got != want {
			t.Errorf("FromJSON(%s) = %s, %v; want %s", in, got, err, want)
		}
	}
	if _, err := FromJSON([]byte(`{`)); err == nil {
		t.Error("FromJSON of broken JSON: no error")
	}
}
