package attack_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nekro-go/nekro/internal/testutil"
)

// A download to a public address of the host's own interfaces reaches
// every service bound to 0.0.0.0: it is refused like loopback. The host
// is a network namespace of its own here, with a public address on its
// loopback interface (no dummy interfaces in every kernel) and a web server listening on all addresses.
func TestDownloadCannotReachTheHostByItsPublicAddress(t *testing.T) {
	requireRoot(t)
	data := testutil.DataDir(t)
	www := t.TempDir()
	os.WriteFile(filepath.Join(www, "secret.txt"), []byte("host-only service"), 0o644)
	const addr = "192.88.99.77" // public (not private, shared or documentation)
	script := `set -e
ip link set lo up
ip addr add ` + addr + `/32 dev lo
cd "$WWW"
python3 -m http.server --bind 0.0.0.0 8765 >/dev/null 2>&1 &
server=$!
trap 'kill $server' EXIT
for i in $(seq 50); do
  python3 -c 'import urllib.request as u; print("REACHABLE", u.urlopen("http://` + addr + `:8765/secret.txt").read().decode())' 2>/dev/null && break
  sleep 0.1
done
"$NEKRO" exec --data "$DATA" --chat ssrf --user u1 - <<'EOF'
print("RESULT", cache_external_resource("http://` + addr + `:8765/secret.txt"))
EOF
`
	cmd := exec.Command("unshare", "--net", "sh", "-c", script)
	cmd.Env = append(os.Environ(), "WWW="+www, "NEKRO="+testutil.NekroExamples(t), "DATA="+data)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	s := string(out)
	if !strings.Contains(s, "REACHABLE host-only service") {
		t.Fatalf("the service was not up on %s, so the test proves nothing:\n%s", addr, s)
	}
	if strings.Contains(s, "RESULT") && !strings.Contains(s, "address of this host") || strings.Contains(s, "资源已下载") {
		t.Errorf("a download reached the host's own service:\n%s", s)
	}
	if !strings.Contains(s, "refused to connect to "+addr) {
		t.Errorf("want the download refused, naming %s:\n%s", addr, s)
	}
}
