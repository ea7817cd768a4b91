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

//go:embed pip_shim.py
var pipShimPy []byte

// pipCommand is bin/pip and bin/pip3: the command runs nekro's pip.
var pipCommand = []byte("#!/usr/bin/env python3\n# nekro's pip: see /app/.nekro/py/pip/__init__.py\n" +
	"import sys\nsys.path.insert(0, \"/app/.nekro/py\")\nfrom pip import main\nsys.exit(main())\n")

// PipShim returns the files of nekro's pip, by their names in a run's
// /app/.nekro (see Boot's Spec.Files): the pip package, which the run's
// own process imports first (api_caller._prepare_run) and programs it
// starts find through PYTHONPATH=/app/.nekro/py, a sitecustomize that
// gives those programs the chat's package layer, and the pip and pip3
// commands for sandbox.RunPath. Backends make the files under
// bin/ executable.
func PipShim() map[string][]byte {
	return map[string][]byte{
		"py/pip/__init__.py":  pipShimPy,
		"py/pip/__main__.py":  []byte("import sys\n\nfrom pip import main\n\nsys.exit(main())\n"),
		"py/sitecustomize.py": []byte("# nekro: programs the run starts import the chat's package layer too, after the system's packages.\nimport sys\n\nif \"/app/shared/.packages\" not in sys.path:\n    sys.path.append(\"/app/shared/.packages\")\n"),
		"bin/pip":             pipCommand,
		"bin/pip3":            pipCommand,
	}
}

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
