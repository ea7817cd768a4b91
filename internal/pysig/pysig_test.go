package pysig_test

import (
	"strings"
	"testing"

	"github.com/nekro-go/nekro/internal/pluginhost"
	"github.com/nekro-go/nekro/internal/pysig"
	"github.com/nekro-go/nekro/plugin"
)

type sumArgs struct {
	Num1  int     `json:"num1" jsonschema:"the first addend"`
	Num2  int     `json:"num2" jsonschema:"the second addend"`
	Note  *string `json:"note"`
	Times int     `json:"times,omitempty" default:"1"`
}

func method(t *testing.T, doc string) *pluginhost.MethodInfo {
	t.Helper()
	p := plugin.New(plugin.Meta{Name: "T", ModuleName: "m", Author: "a", Version: "1", Description: "d", URL: "https://example.org"})
	plugin.MountSandboxMethod(p, plugin.Method{Type: plugin.Tool, Name: "my_sum", Description: "Adds.", Doc: doc},
		func(*plugin.Ctx, sumArgs) (int, error) { return 0, nil })
	return pluginhost.Methods(p)[0]
}

func TestSignature(t *testing.T) {
	got := pysig.Signature(method(t, "Add."))
	if want := "my_sum(num1: int, num2: int, note: Optional[str] = None, times: int = 1) -> int"; got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

// The field tags' text is what the AI reads of each parameter, wherever
// the author put (or did not put) an Args block.
func TestDocArgsComeFromTheTags(t *testing.T) {
	for name, c := range map[string]struct{ doc, want string }{
		"no block, other sections": {
			doc: "Add two integers.\n\nReturns:\n    int: the sum.",
			want: "Add two integers.\n\nArgs:\n    num1 (int): the first addend\n    num2 (int): the second addend\n" +
				"    note (Optional[str])\n    times (int)\n\nReturns:\n    int: the sum.",
		},
		"summary only": {
			doc:  "Add two integers.",
			want: "Add two integers.\n\nArgs:\n    num1 (int): the first addend\n    num2 (int): the second addend\n    note (Optional[str])\n    times (int)",
		},
		"the author's block": {
			doc: "Add.\n\nArgs:\n    num1 (int): stale text\n    note (str): a remark,\n        on two lines.\n    gone (int): no such parameter\n\nExample:\n    my_sum(1, 2)",
			want: "Add.\n\nArgs:\n    num1 (int): the first addend\n    num2 (int): the second addend\n" +
				"    note (Optional[str]): a remark,\n        on two lines.\n    times (int)\n\nExample:\n    my_sum(1, 2)",
		},
	} {
		if got := pysig.Doc(method(t, c.doc)); got != c.want {
			t.Errorf("%s:\ngot:\n%s\nwant:\n%s", name, got, c.want)
		}
	}
}

func TestDocWithoutParameters(t *testing.T) {
	p := plugin.New(plugin.Meta{Name: "T", ModuleName: "m", Author: "a", Version: "1", Description: "d", URL: "https://example.org"})
	plugin.MountSandboxMethod(p, plugin.Method{Type: plugin.Tool, Name: "now", Doc: "The time.\n\nReturns:\n    str: now."},
		func(*plugin.Ctx, struct{}) (string, error) { return "", nil })
	if got := pysig.Doc(pluginhost.Methods(p)[0]); strings.Contains(got, "Args:") || got != "The time.\n\nReturns:\n    str: now." {
		t.Errorf("got %q", got)
	}
}
