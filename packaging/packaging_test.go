// Package packaging_test keeps the deployment files true to the binary:
// compose.yaml, nekro.env.example, the Dockerfile and nekro.service name
// only variables and paths nekro knows, and agree with each other. It
// checks the files as written; packaging/test-image.sh builds the image
// and runs it.
package packaging_test

import (
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/nekro-go/nekro/adapters/onebot"
	"github.com/nekro-go/nekro/internal/testutil"
)

// compose is the part of compose.yaml checked here.
type compose struct {
	Services map[string]struct {
		Build *struct {
			Context    string `yaml:"context"`
			Dockerfile string `yaml:"dockerfile"`
		} `yaml:"build"`
		Image           string            `yaml:"image"`
		Privileged      bool              `yaml:"privileged"`
		EnvFile         string            `yaml:"env_file"`
		Environment     map[string]string `yaml:"environment"`
		Volumes         []string          `yaml:"volumes"`
		Ports           []string          `yaml:"ports"`
		DependsOn       []string          `yaml:"depends_on"`
		Profiles        []string          `yaml:"profiles"`
		StopGracePeriod string            `yaml:"stop_grace_period"`
	} `yaml:"services"`
	Volumes map[string]any `yaml:"volumes"`
}

var envName = regexp.MustCompile(`NEKRO_[A-Z0-9_]+`)

// knownEnv is every NEKRO_ variable `nekro serve --help` names.
func knownEnv(t *testing.T) map[string]bool {
	r := testutil.RunNekro(t, nil, "serve", "--help")
	if r.Code != 0 {
		t.Fatalf("nekro serve --help: %+v", r)
	}
	known := map[string]bool{}
	for _, n := range envName.FindAllString(r.Stdout+r.Stderr, -1) {
		known[n] = true
	}
	if !known["NEKRO_LISTEN"] || !known["NEKRO_ONEBOT_TOKEN"] {
		t.Fatalf("serve --help names no variables:\n%s", r.Stdout)
	}
	return known
}

func read(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The compose file: its services, volumes, ports and variables agree with
// nekro's flags, the Dockerfile and each other.
func TestComposeFile(t *testing.T) {
	known := knownEnv(t)
	text := read(t, "compose.yaml")
	var c compose
	if err := yaml.Unmarshal([]byte(text), &c); err != nil {
		t.Fatalf("compose.yaml: %v", err)
	}
	nekro, ok := c.Services["nekro"]
	if !ok || c.Services["napcat"].Image == "" || !slices.Contains(c.Services["postgres"].Profiles, "postgres") {
		t.Fatalf("want services nekro, napcat, and postgres under the postgres profile: %+v", c.Services)
	}
	if nekro.Build == nil || nekro.Build.Context != ".." {
		t.Fatalf("nekro is built from the repository root: %+v", nekro.Build)
	}
	if _, err := os.Stat("../" + nekro.Build.Dockerfile); err != nil {
		t.Errorf("nekro's Dockerfile: %v", err)
	}
	if !nekro.Privileged {
		t.Error("nekro runs without privileges: bwrap and the volumes need them (docs/install.md)")
	}
	if nekro.EnvFile != "nekro.env" {
		t.Errorf("nekro's env_file is %q, the name the docs copy nekro.env.example to is nekro.env", nekro.EnvFile)
	}
	for name := range nekro.Environment {
		if !known[name] {
			t.Errorf("compose.yaml sets %s, which nekro does not read", name)
		}
	}
	for _, name := range envName.FindAllString(text, -1) {
		if !known[name] {
			t.Errorf("compose.yaml names %s (in a comment?), which nekro does not read", name)
		}
	}

	// The data directory is the nekro-data volume, as in the Dockerfile.
	data := nekro.Environment["NEKRO_DATA_DIR"]
	docker := read(t, "Dockerfile")
	if data == "" || !strings.Contains(docker, "NEKRO_DATA_DIR="+data) || !strings.Contains(docker, "VOLUME "+data) {
		t.Errorf("NEKRO_DATA_DIR %q disagrees with the Dockerfile", data)
	}
	if !slices.Contains(nekro.Volumes, "nekro-data:"+data) {
		t.Errorf("the data directory %s is not the nekro-data volume: %v", data, nekro.Volumes)
	}
	for name, svc := range c.Services {
		for _, v := range svc.Volumes {
			vol, _, _ := strings.Cut(v, ":")
			if _, ok := c.Volumes[vol]; !ok {
				t.Errorf("service %s mounts volume %s, which is not declared", name, vol)
			}
		}
	}

	// The API is published on the host's loopback, at the port nekro
	// listens on in the container, as the Dockerfile exposes it.
	_, port, _ := strings.Cut(nekro.Environment["NEKRO_LISTEN"], ":")
	if !slices.Contains(nekro.Ports, "127.0.0.1:"+port+":"+port) || !strings.Contains(docker, "EXPOSE "+port) {
		t.Errorf("nekro listens on %s; ports %v", nekro.Environment["NEKRO_LISTEN"], nekro.Ports)
	}
	// NapCat connects to nekro by its service name, at the adapter's path.
	if !strings.Contains(text, "ws://nekro:"+port+onebot.Path) || !slices.Contains(c.Services["napcat"].DependsOn, "nekro") {
		t.Errorf("NapCat's URL in the comments is not ws://nekro:%s%s, or it does not depend on nekro", port, onebot.Path)
	}
	// The grace period outlasts --shutdown-timeout's default.
	grace, err := time.ParseDuration(nekro.StopGracePeriod)
	if err != nil || grace <= 30*time.Second {
		t.Errorf("stop_grace_period %q: want more than the 30s turns may take to finish", nekro.StopGracePeriod)
	}

	// The commented database URL reaches the postgres service as its user.
	m := regexp.MustCompile(`NEKRO_DATABASE_URL: postgres://([^:]+):([^@]+)@([^:/]+):5432/(\w+)`).FindStringSubmatch(text)
	pg := c.Services["postgres"].Environment
	if m == nil || m[1] != pg["POSTGRES_USER"] || m[2] != pg["POSTGRES_PASSWORD"] || m[3] != "postgres" || m[4] != pg["POSTGRES_DB"] {
		t.Errorf("the commented NEKRO_DATABASE_URL %q does not match the postgres service %v", m, pg)
	}
}

// nekro.env.example names only variables nekro reads, the secrets empty.
func TestEnvExample(t *testing.T) {
	known := knownEnv(t)
	for i, line := range strings.Split(read(t, "nekro.env.example"), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, value, ok := strings.Cut(line, "=")
		if !ok || !known[name] {
			t.Errorf("nekro.env.example:%d: %q is not a variable nekro reads", i+1, line)
		}
		if value != "" {
			t.Errorf("nekro.env.example:%d: %s has a value; the example leaves every value to the operator", i+1, name)
		}
	}
}

// The systemd unit: the paths it installs to and runs agree, and it
// allows the shutdown more than --shutdown-timeout's default.
func TestSystemdUnit(t *testing.T) {
	unit := read(t, "nekro.service")
	get := func(key string) string {
		m := regexp.MustCompile(`(?m)^` + key + `=(.*)$`).FindStringSubmatch(unit)
		if m == nil {
			t.Fatalf("nekro.service has no %s", key)
		}
		return m[1]
	}
	start := get("ExecStart")
	if !strings.HasPrefix(start, "/usr/local/bin/nekro serve") || !strings.Contains(unit, "install -m 0755 bin/nekro /usr/local/bin/nekro") {
		t.Errorf("ExecStart %q does not run the binary where the comment installs it", start)
	}
	data := regexp.MustCompile(`--data (\S+)`).FindStringSubmatch(start)
	if data == nil || !strings.HasSuffix(get("ExecStartPre"), " "+data[1]) {
		t.Errorf("the data directory of ExecStart is not the one ExecStartPre creates")
	}
	if get("EnvironmentFile") != "/etc/nekro/nekro.env" || !strings.Contains(read(t, "../docs/install.md"), "/etc/nekro/nekro.env") {
		t.Error("EnvironmentFile is not /etc/nekro/nekro.env, which docs/install.md fills in")
	}
	stop := strings.TrimSuffix(get("TimeoutStopSec"), "s")
	if n, err := strconv.Atoi(stop); err != nil || n <= 30 {
		t.Errorf("TimeoutStopSec %q: want more than the 30s turns may take to finish", get("TimeoutStopSec"))
	}
	if get("KillSignal") != "SIGTERM" || get("KillMode") != "mixed" {
		t.Error("nekro stops gracefully on SIGTERM to its main process only")
	}
}
