package rpc_test

import (
	"bufio"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the expected answers in testdata/transcripts")

// The wire protocol, as golden transcripts: each file under
// testdata/transcripts holds requests ("> " lines, sent over one
// connection in order) each followed by the server's exact answer
// ("< " lines). They document the protocol for other clients; run
// `go test ./internal/rpc -run Transcripts -update` after changing it on
// purpose, and read the diff.
func TestTranscripts(t *testing.T) {
	files, _ := filepath.Glob("testdata/transcripts/*.txt")
	if len(files) == 0 {
		t.Fatal("no transcripts")
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			_, c := start(t)
			raw, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			var out strings.Builder
			sc := bufio.NewScanner(strings.NewReader(string(raw)))
			sc.Buffer(make([]byte, 1<<20), 1<<20)
			var want []string
			for sc.Scan() {
				line := sc.Text()
				switch {
				case strings.HasPrefix(line, "> "):
					out.WriteString(line + "\n")
					if _, err := c.c.Write([]byte(line[2:] + "\n")); err != nil {
						t.Fatal(err)
					}
					got, err := c.r.ReadString('\n')
					if err != nil {
						t.Fatal(err)
					}
					out.WriteString("< " + got)
				case strings.HasPrefix(line, "< "):
					want = append(want, line)
				default: // comments and blank lines are kept as they are
					out.WriteString(line + "\n")
				}
			}
			if *update {
				if err := os.WriteFile(file, []byte(out.String()), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			if out.String() != string(raw) {
				t.Errorf("transcript %s differs; the server now answers:\n%s", file, out.String())
			}
		})
	}
}
