package pluginconfig

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

type weather struct {
	APIKey  string   `json:"api_key" title:"API key" description:"the weather service's key" secret:"true"`
	Timeout int      `json:"timeout" title:"Timeout" min:"1" max:"60"`
	Units   string   `json:"units" choices:"metric,imperial"`
	Ratio   float64  `json:"ratio"`
	Verbose bool     `json:"verbose"`
	Cities  []string `json:"cities"`
	Prompt  string   `json:"prompt" multiline:"true"`
	skipped int
}

func schema(t *testing.T) *Schema {
	t.Helper()
	s, err := Reflect(weather{Timeout: 10, Units: "metric", Ratio: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestReflectDescribesTheStruct(t *testing.T) {
	s := schema(t)
	var names []string
	for _, f := range s.Fields {
		names = append(names, f.Name)
	}
	if got := strings.Join(names, ","); got != "api_key,timeout,units,ratio,verbose,cities,prompt" {
		t.Fatalf("fields %s", got)
	}
	f, _ := s.Field("timeout")
	if f.Kind != Integer || f.Default != int64(10) || *f.Min != 1 || *f.Max != 60 || f.Title != "Timeout" {
		t.Errorf("timeout: %+v", f)
	}
	if f, _ := s.Field("cities"); f.Kind != Array || f.Default == nil {
		t.Errorf("cities (a nil slice) must default to an empty list: %+v", f)
	}
	js := s.JSONSchema()
	key := js["properties"].(map[string]any)["api_key"].(map[string]any)
	if key["x-secret"] != true || key["type"] != String {
		t.Errorf("api_key schema %v", key)
	}
	if _, err := Reflect(42); err == nil {
		t.Error("a non-struct was accepted")
	}
	if _, err := Reflect(struct {
		C chan int `json:"c"`
	}{}); err == nil || !strings.Contains(err.Error(), "not a setting type") {
		t.Errorf("a channel field: %v", err)
	}
}

func TestCheckNamesTheFieldOfABadValue(t *testing.T) {
	s := schema(t)
	for _, c := range []struct {
		values map[string]any
		want   string
	}{
		{map[string]any{"timeout": "ten"}, `setting timeout: must be a whole number, got "ten"`},
		{map[string]any{"timeout": 61.0}, "setting timeout: must be at most 60"},
		{map[string]any{"timeout": 1.5}, "setting timeout: must be a whole number"},
		{map[string]any{"units": "kelvin"}, "setting units: must be one of metric, imperial"},
		{map[string]any{"colour": "red"}, "setting colour: no such setting (settings: api_key, timeout"},
		{map[string]any{"cities": "Paris"}, "setting cities: must be a list"},
		{map[string]any{"verbose": nil}, "setting verbose: must be true or false, not empty"},
	} {
		if _, err := s.Check(c.values); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: got %v, want %q", c.values, err, c.want)
		}
	}
	v, err := s.Check(map[string]any{"timeout": 30.0, "cities": []any{"Paris"}})
	if err != nil || v["timeout"] != int64(30) || v["units"] != "metric" {
		t.Errorf("good values: %v %v", v, err)
	}
}

func TestParseReadsCommandLineText(t *testing.T) {
	s := schema(t)
	for _, c := range []struct {
		field, text string
		want        any
	}{
		{"verbose", "yes", true}, {"verbose", "0", false}, {"timeout", "42", int64(42)}, {"ratio", "2.5", 2.5},
		{"api_key", "sk-1", "sk-1"},
	} {
		f, _ := s.Field(c.field)
		if got, err := f.Parse(c.text); err != nil || got != c.want {
			t.Errorf("%s=%s: %v %v", c.field, c.text, got, err)
		}
	}
	f, _ := s.Field("cities")
	if got, err := f.Parse(`["a","b"]`); err != nil || len(got.([]any)) != 2 {
		t.Errorf("cities: %v %v", got, err)
	}
	if _, err := f.Parse("a,b"); err == nil || !strings.Contains(err.Error(), "setting cities: must be JSON") {
		t.Errorf("cities from bad JSON: %v", err)
	}
	f, _ = s.Field("verbose")
	if _, err := f.Parse("maybe"); err == nil {
		t.Error("verbose=maybe accepted")
	}
}

func TestFileKeepsSettingsAndSeesHandEdits(t *testing.T) {
	dir := t.TempDir()
	s := schema(t)
	f, err := Open(dir, s)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, FileName))
	for _, w := range []string{"# API key: the weather service's key\napi_key: \"\"", "timeout: 10", "# (one of [metric imperial])\nunits: metric"} {
		if !strings.Contains(string(b), w) {
			t.Errorf("the new file lacks %q:\n%s", w, b)
		}
	}
	if _, err := f.Set(map[string]any{"api_key": "sk-secret", "timeout": int64(20)}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Set(map[string]any{"timeout": int64(99)}); err == nil {
		t.Error("timeout 99 was stored")
	}
	// A second process (or a restart) reads what was set.
	g, err := Open(dir, s)
	if err != nil {
		t.Fatal(err)
	}
	v, ver := g.Values()
	if v["api_key"] != "sk-secret" || v["timeout"] != int64(20) {
		t.Fatalf("reopened: %v", v)
	}
	if s.Mask(v)["api_key"] != Masked {
		t.Error("the secret is not masked")
	}
	// Sending the mask back keeps the secret.
	if v, _ := g.Set(map[string]any{"api_key": Masked, "units": "imperial"}); v["api_key"] != "sk-secret" {
		t.Errorf("masked PUT lost the secret: %v", v)
	}

	// A hand edit is picked up within a second, without reopening.
	edit := func(text string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, FileName), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		f.mu.Lock()
		f.checked = time.Time{} // as if a second had passed
		f.mu.Unlock()
	}
	edit("api_key: k2\ntimeout: 5\n")
	v, ver2 := f.Values()
	if v["timeout"] != int64(5) || v["api_key"] != "k2" || v["units"] != "metric" || ver2 == ver {
		t.Errorf("after the edit: %v (version %d)", v, ver2)
	}
	// A broken edit keeps the last good values and says why.
	edit("timeout: [\n")
	if v, _ := f.Values(); v["timeout"] != int64(5) {
		t.Errorf("a broken file changed the values: %v", v)
	}
	if err := f.Err(); err == nil || !strings.Contains(err.Error(), FileName) {
		t.Errorf("Err = %v", err)
	}
	edit("timeout: 0\n")
	if err := f.Err(); err == nil || !strings.Contains(err.Error(), "setting timeout: must be at least 1") {
		t.Errorf("Err = %v", err)
	}
}
