package sandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
)

// Package is a Python distribution the sandbox's interpreter can import.
type Package struct {
	Module  string `json:"module"`  // what code imports, e.g. PIL
	Name    string `json:"name"`    // the distribution, e.g. Pillow
	Version string `json:"version"` // "" when it carries no metadata
}

// wellKnown are the packages AI code reaches for first, as module and
// distribution name, in the order the prompt lists them.
var wellKnown = [][2]string{
	{"numpy", "numpy"}, {"pandas", "pandas"}, {"matplotlib", "matplotlib"}, {"PIL", "Pillow"},
	{"scipy", "scipy"}, {"sympy", "sympy"}, {"sklearn", "scikit-learn"}, {"seaborn", "seaborn"},
	{"networkx", "networkx"}, {"statsmodels", "statsmodels"}, {"cv2", "opencv-python"},
	{"imageio", "imageio"}, {"skimage", "scikit-image"}, {"requests", "requests"}, {"bs4", "beautifulsoup4"},
	{"lxml", "lxml"}, {"yaml", "PyYAML"}, {"openpyxl", "openpyxl"}, {"xlrd", "xlrd"}, {"docx", "python-docx"},
	{"reportlab", "reportlab"}, {"qrcode", "qrcode"}, {"jinja2", "Jinja2"}, {"dateutil", "python-dateutil"},
	{"pytz", "pytz"}, {"tabulate", "tabulate"}, {"pydantic", "pydantic"}, {"aiofiles", "aiofiles"},
}

// probeScript finds the well-known packages without importing them (an
// import of the whole stack costs a second of CPU): a module the path
// finder locates, with the version its distribution's metadata gives.
const probeScript = `
import importlib.util, importlib.metadata, json, sys
out = []
for mod, dist in json.loads(sys.argv[1] if len(sys.argv) > 1 else %q):
    try:
        if importlib.util.find_spec(mod) is None:
            continue
    except Exception:
        continue
    try:
        ver = importlib.metadata.version(dist)
    except Exception:
        ver = ""
    out.append({"module": mod, "name": dist, "version": ver})
print(json.dumps(out))
`

// ProbePackages lists which of the well-known data and web packages the
// sandbox's Python has, through the backend's Prober.
func ProbePackages(ctx context.Context, r Runner) ([]Package, error) {
	p, ok := r.(Prober)
	if !ok {
		return nil, fmt.Errorf("the sandbox backend cannot be probed")
	}
	list, _ := json.Marshal(wellKnown)
	out, err := p.Probe(ctx, fmt.Sprintf(probeScript, string(list)))
	if err != nil {
		return nil, err
	}
	var pkgs []Package
	if err := json.Unmarshal([]byte(strings.TrimSpace(string(out))), &pkgs); err != nil {
		return nil, fmt.Errorf("probe the sandbox's python: %w in %.200q", err, out)
	}
	return pkgs, nil
}

// PackagesSentence is the prompt's line about what the code can import.
func PackagesSentence(pkgs []Package) string {
	if len(pkgs) == 0 {
		return "Only the Python standard library is installed."
	}
	names := make([]string, 0, len(pkgs))
	plot := false
	for _, p := range pkgs {
		n := p.Name
		if p.Module != p.Name && !strings.EqualFold(p.Module, p.Name) {
			n += " (import " + p.Module + ")"
		}
		if p.Version != "" {
			n += " " + p.Version
		}
		names = append(names, n)
		plot = plot || p.Module == "matplotlib"
	}
	s := "Besides the standard library, these packages are installed: " + strings.Join(names, ", ") + "."
	if plot {
		s += " matplotlib draws without a display: save figures to a file (plt.savefig('/app/shared/plot.png')) and send the file."
	}
	return s
}
