// Command toolserver is an MCP server (stdio) for nekro's tests whose
// tools list changes while it runs: the file named by
// NEKRO_TOOLSERVER_FILE holds its tools, comma-separated ("alpha,beta";
// a name ending in + also takes an integer "times"), and it is read every
// 50 ms. A change of the file changes the tools, which the SDK announces
// with notifications/tools/list_changed. Without the file: "alpha".
//
// Each tool NAME answers "NAME says TEXT" (times times).
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	file := os.Getenv("NEKRO_TOOLSERVER_FILE")
	srv := mcp.NewServer(&mcp.Implementation{Name: "toolserver", Version: "1"}, nil)
	current := map[string]string{} // name -> spec
	apply := func() {
		specs := "alpha"
		if b, err := os.ReadFile(file); err == nil {
			specs = strings.TrimSpace(string(b))
		}
		want := map[string]string{}
		for _, s := range strings.Split(specs, ",") {
			if s = strings.TrimSpace(s); s != "" {
				want[strings.TrimSuffix(s, "+")] = s
			}
		}
		var gone []string
		for name := range current {
			if _, ok := want[name]; !ok {
				gone = append(gone, name)
				delete(current, name)
			}
		}
		if len(gone) > 0 {
			srv.RemoveTools(gone...)
		}
		for name, spec := range want {
			if current[name] == spec {
				continue
			}
			current[name] = spec
			srv.AddTool(tool(name, strings.HasSuffix(spec, "+")), answer(name))
		}
	}
	apply()
	go func() {
		for range time.Tick(50 * time.Millisecond) {
			apply()
		}
	}()
	if err := srv.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func tool(name string, times bool) *mcp.Tool {
	props := map[string]any{"text": map[string]any{"type": "string", "description": "what to say"}}
	if times {
		props["times"] = map[string]any{"type": "integer", "description": "how many times", "default": 1}
	}
	return &mcp.Tool{Name: name, Description: "Says the text as " + name + ".",
		InputSchema: map[string]any{"type": "object", "properties": props, "required": []string{"text"}}}
}

func answer(name string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var args struct {
			Text  string `json:"text"`
			Times int    `json:"times"`
		}
		json.Unmarshal(req.Params.Arguments, &args)
		out := name + " says " + args.Text
		for i := 1; i < args.Times; i++ {
			out += " " + args.Text
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: out}}}, nil
	}
}
