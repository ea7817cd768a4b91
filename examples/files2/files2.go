// Package files2 ports the examples of seed 003 ("文件交互", the _ctx.fs
// page) with their Python-callable names: analyze_file and
// generate_report, plus fetch_image, export_result and write_report, the
// page's mixed_forward_file and forward_file snippets made into methods.
//
// Its generate_report differs from seed 002's (examples/files) under the
// same Python name. Names are unique across enabled plugins, so this
// package is not in examples/all: the nekro-files2 command beside it is a
// nekro binary built with this plugin, the way an operator adds plugins
// (a main.go that imports them and calls nekro.Main).
package files2

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"unicode/utf8"

	"github.com/nekro-go/nekro/plugin"
)

var p = plugin.New(plugin.Meta{
	Name:        "File bridge examples",
	ModuleName:  "files2",
	Author:      "nekro_examples",
	Version:     "1.0.0",
	Description: "Passing files between the plugin and the sandbox with ctx.FS(), as seed 003 shows.",
})

func init() {
	plugin.MountSandboxMethod(p, plugin.Method{
		Type: plugin.Tool, Name: "analyze_file", Description: "分析文件",
		Doc: `Count the characters of a text file you have in the sandbox.

Args:
    file_path (str): a path under /app/shared/ or /app/uploads/.

Returns:
    str: "文件共 N 字符", or "指定文件不存在".

Example:
    print(analyze_file("/app/shared/notes.txt"))`,
	}, analyzeFile)

	plugin.MountSandboxMethod(p, plugin.Method{
		Type: plugin.Behavior, Name: "generate_report", Description: "生成报告",
		Doc: `Write a Markdown report to /app/shared/report.md and send it to the chat.

Args:
    title (str): the report's title.
    content (str): its body, in Markdown.

Returns:
    str: "报告已生成并发送", or, in a run without a chat,
        "报告已生成: /app/shared/report.md".

Example:
    generate_report("Weekly summary", "- shipped the file bridge")`,
	}, generateReport)

	plugin.MountSandboxMethod(p, plugin.Method{
		Type: plugin.Tool, Name: "fetch_image", Description: "获取远程图片",
		Doc: `Download an image from a URL into the sandbox (you have no network).

Args:
    url (str): an http or https URL.

Returns:
    str: its sandbox path, "/app/shared/image.png".

Example:
    path = fetch_image("https://example.com/cat.png")
    data = open(path, "rb").read()`,
	}, fetchImage)

	plugin.MountSandboxMethod(p, plugin.Method{
		Type: plugin.Tool, Name: "export_result", Description: "导出结果",
		Doc: `Save a result as JSON in the sandbox.

Args:
    result (dict): any JSON object.

Returns:
    str: its sandbox path, "/app/shared/result.json".

Example:
    import json
    path = export_result({"score": 3})
    print(json.load(open(path)))`,
	}, exportResult)

	plugin.MountSandboxMethod(p, plugin.Method{
		Type: plugin.Tool, Name: "write_report", Description: "写入报告",
		Doc: `Write text to /app/shared/report.md without copying anything.

Args:
    text (str): the report.

Returns:
    str: "/app/shared/report.md".

Example:
    print(open(write_report("# 报告内容")).read())`,
	}, writeReport)

	plugin.Register(p)
}

// FileArgs are analyze_file's parameters.
type FileArgs struct {
	FilePath string `json:"file_path" jsonschema:"a path under /app/shared/ or /app/uploads/"`
}

func analyzeFile(ctx *plugin.Ctx, a FileArgs) (string, error) {
	// Seed 003 calls get_file and reads the host path; ReadFile resolves
	// and reads in one rooted step, so a symlink swapped in meanwhile
	// cannot redirect it.
	b, err := ctx.FS().ReadFile(a.FilePath)
	if errors.Is(err, fs.ErrNotExist) {
		return "指定文件不存在", nil
	}
	if err != nil {
		return "", err
	}
	if !utf8.Valid(b) {
		return "", fmt.Errorf("%s is not UTF-8 text", a.FilePath)
	}
	return fmt.Sprintf("文件共 %d 字符", utf8.RuneCount(b)), nil
}

// ReportArgs are generate_report's parameters.
type ReportArgs struct {
	Title   string `json:"title" jsonschema:"the report's title"`
	Content string `json:"content" jsonschema:"its body, in Markdown"`
}

func generateReport(ctx *plugin.Ctx, a ReportArgs) (string, error) {
	report := fmt.Sprintf("# %s\n\n%s", a.Title, a.Content)
	sp, err := ctx.FS().MixedForwardFile(ctx, []byte(report), "report.md")
	if err != nil {
		return "", err
	}
	if err := ctx.SendFile(sp); err != nil {
		if errors.Is(err, plugin.ErrNoService) {
			return "报告已生成: " + sp, nil // e.g. nekro exec: no chat to send to
		}
		return "", err
	}
	return "报告已生成并发送", nil
}

// URLArgs are fetch_image's parameters.
type URLArgs struct {
	URL string `json:"url" jsonschema:"an http or https URL"`
}

func fetchImage(ctx *plugin.Ctx, a URLArgs) (string, error) {
	return ctx.FS().MixedForwardFile(ctx, a.URL, "image.png")
}

// ResultArgs are export_result's parameters.
type ResultArgs struct {
	Result map[string]any `json:"result" jsonschema:"any JSON object"`
}

func exportResult(ctx *plugin.Ctx, a ResultArgs) (string, error) {
	data, err := json.Marshal(a.Result)
	if err != nil {
		return "", err
	}
	return ctx.FS().MixedForwardFile(ctx, data, "result.json")
}

// TextArgs are write_report's parameters.
type TextArgs struct {
	Text string `json:"text" jsonschema:"the report"`
}

func writeReport(ctx *plugin.Ctx, a TextArgs) (string, error) {
	// Seed 003: write under shared_path, then forward_file gives the
	// sandbox path. Create writes beneath /app/shared through a Root.
	f, err := ctx.FS().Create("/app/shared/report.md")
	if err != nil {
		return "", err
	}
	if _, err := io.WriteString(f, a.Text); err != nil {
		f.Close()
		return "", err
	}
	if err := f.Close(); err != nil {
		return "", err
	}
	return ctx.FS().ForwardFile(f.Name())
}
