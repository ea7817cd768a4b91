// Package stub generates the Python side of a run: api_caller.py, with one
// function per callable method carrying its real signature and doc text,
// and the fixed boot.py that runs the AI's code with the stubs imported.
package stub

import (
	"bytes"
	_ "embed"
	"fmt"
	"strings"
	"text/template"

	"github.com/nekro-go/nekro/internal/pluginhost"
	"github.com/nekro-go/nekro/internal/pysig"
	"github.com/nekro-go/nekro/plugin"
)

//go:embed boot.py
var bootPy []byte

//go:embed api_caller.py.tmpl
var apiCallerTmpl string

var tmpl = template.Must(template.New("api_caller").Parse(apiCallerTmpl))

// Boot returns boot.py, the run's entry point.
func Boot() []byte { return bootPy }

type stubMethod struct {
	Name, Signature, Result, Doc, Kind, ArgsDict string
}

// APICaller returns api_caller.py for the given methods.
func APICaller(methods []*pluginhost.MethodInfo) ([]byte, error) {
	data := struct {
		All     string
		Methods []stubMethod
	}{}
	all := []string{`"NekroError"`, `"PluginError"`}
	for _, m := range methods {
		all = append(all, fmt.Sprintf("%q", m.Name))
		var args []string
		for _, p := range m.Params() {
			args = append(args, fmt.Sprintf("%q: %s", p.Name, p.Name))
		}
		result := m.ResultPyType()
		if m.Type == plugin.MultimodalAgent {
			result = "list[dict]"
		}
		data.Methods = append(data.Methods, stubMethod{
			Name:      m.Name,
			Signature: pysig.Params(m),
			Result:    result,
			Doc:       docstring(pysig.Doc(m)),
			Kind:      kind(m.Type),
			ArgsDict:  "{" + strings.Join(args, ", ") + "}",
		})
	}
	data.All = strings.Join(all, ", ")
	var b bytes.Buffer
	if err := tmpl.Execute(&b, data); err != nil {
		return nil, fmt.Errorf("generate api_caller.py: %w", err)
	}
	return b.Bytes(), nil
}

func kind(t plugin.MethodType) string {
	switch t {
	case plugin.Agent:
		return "agent"
	case plugin.Behavior:
		return "behavior"
	case plugin.MultimodalAgent:
		return "multimodal_agent"
	}
	return "tool"
}

// docstring escapes text for the inside of a """...""" literal and indents
// its continuation lines under the def.
func docstring(doc string) string {
	doc = strings.TrimSpace(doc)
	doc = strings.ReplaceAll(doc, `\`, `\\`)
	doc = strings.ReplaceAll(doc, `"""`, `\"\"\"`)
	lines := strings.Split(doc, "\n")
	for i := 1; i < len(lines); i++ {
		if lines[i] != "" {
			lines[i] = "    " + lines[i]
		}
	}
	out := strings.Join(lines, "\n")
	if strings.HasSuffix(out, `"`) {
		out = out[:len(out)-1] + `\"` // a quote right before the closing """
	}
	if len(lines) > 1 {
		out += "\n    "
	}
	return out
}
