// Package files ports the file examples of the plugin documents as one Go
// plugin, keeping their Python-callable names:
//
//   - the plugin data directory of seeds 000/001 ("插件持久化目录"):
//     save_log, save_image, read_config, the init hook preparing cache/
//     models/ exports/ temp/ user_uploads/ and config.json, list_exports,
//     cache_external_resource, cleanup_temp_files, process_user_file,
//     export_data, and download_model with load_model (files plus KV);
//   - the path helpers of seed 002 ("文件交互"): process_image,
//     generate_report and get_file_content.
//
// Seed 003's generate_report, a different method under the same Python
// name, lives in examples/files2. Python names are unique across enabled
// plugins, so the two cannot be enabled together: the standard nekro
// binary carries this package, and examples/files2/nekro-files2 is a
// binary built with files2 instead.
//
// Where the Python joined AI-supplied names onto the plugin directory
// (plugin_dir / "images" / filename), every access here goes through
// Plugin.DataRoot, an os.Root: a name such as "../config.json" is an error,
// not a write outside images/. Where the Python turned sandbox paths into
// host paths and opened them, these methods call ctx.FS().Open or
// ReadFile, which resolve the path beneath /app/shared or /app/uploads at
// the moment of use. Results name files relative to the plugin directory
// or as sandbox paths, never as host paths.
package files

import (
	"context"
	"crypto/md5"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"time"

	"github.com/nekro-go/nekro/plugin"
)

var p = plugin.New(plugin.Meta{
	Name:        "File examples",
	ModuleName:  "files",
	Author:      "nekro_examples",
	Version:     "1.0.0",
	Description: "The plugin data directory and the sandbox file bridge, as the plugin documents show them.",
})

func init() {
	p.OnInit(initPluginResources)

	plugin.MountSandboxMethod(p, plugin.Method{
		Type: plugin.Behavior, Name: "save_log", Description: "保存日志",
		Doc: `Save a log text as a new file in this chat's part of the plugin's logs/.

Args:
    log_content (str): the text to save.

Returns:
    str: which file it went to, e.g. "日志已保存到 log_1700000000123456789.txt".

Example:
    save_log("user asked for the weather")`,
	}, saveLog)

	plugin.MountSandboxMethod(p, plugin.Method{
		Type: plugin.Behavior, Name: "save_image", Description: "保存图片",
		Doc: `Save image bytes as images/<filename> in this chat's part of the plugin's directory.

Args:
    image_data (bytes): the image file's content.
    filename (str): a plain file name such as "cat.png"; names that leave
        images/ (with "/" or "..") are refused.

Returns:
    str: e.g. "图片已保存: images/cat.png".

Example:
    save_image(open("/app/uploads/cat.png", "rb").read(), "cat.png")`,
	}, saveImage)

	plugin.MountSandboxMethod(p, plugin.Method{
		Type: plugin.Tool, Name: "read_config", Description: "读取配置文件",
		Doc: `Read the plugin's config.json.

Returns:
    str: "配置内容: <json>", or "配置文件不存在" when there is none.

Example:
    print(read_config())`,
	}, readConfig)

	plugin.MountSandboxMethod(p, plugin.Method{
		Type: plugin.Tool, Name: "list_exports", Description: "列出导出文件",
		Doc: `List the files this chat exported (its part of the plugin's exports/).

Returns:
    str: "导出文件列表:" and one "- name" line per file, "暂无导出文件"
        when it is empty, "导出目录不存在" when it does not exist.

Example:
    print(list_exports())`,
	}, listExports)

	plugin.MountSandboxMethod(p, plugin.Method{
		Type: plugin.Tool, Name: "cache_external_resource", Description: "缓存外部资源",
		Doc: `Download a URL once and keep it in the plugin's cache/.

The host downloads it (the sandbox has no network), with the operator's
size cap and timeout; private and loopback addresses are refused unless
the operator allows them.

Args:
    url (str): an http or https URL.

Returns:
    str: "资源已下载,大小: N 字节" the first time, "已从缓存加载,大小: N 字节"
        after, or "下载失败: <reason>".

Example:
    print(cache_external_resource("https://example.com/data.json"))`,
	}, cacheExternalResource)

	plugin.MountSandboxMethod(p, plugin.Method{
		Type: plugin.Behavior, Name: "cleanup_temp_files", Description: "清理临时文件",
		Doc: `Delete files in the plugin's temp/ older than max_age_hours.

Args:
    max_age_hours (int): age limit in hours; default 24.

Returns:
    str: "清理完成,删除了 N 个文件", or "临时目录不存在".

Example:
    cleanup_temp_files(48)`,
	}, cleanupTempFiles)

	plugin.MountSandboxMethod(p, plugin.Method{
		Type: plugin.Tool, Name: "process_user_file", Description: "处理用户上传的文件",
		Doc: `Copy a file from the sandbox into this chat's part of the plugin's user_uploads/.

Args:
    file_path (str): a sandbox path under /app/uploads/ or /app/shared/
        (or uploads/... and shared/... relative to /app).

Returns:
    str: "文件已处理并保存,大小: N 字节".

Example:
    process_user_file("/app/uploads/report.pdf")`,
	}, processUserFile)

	plugin.MountSandboxMethod(p, plugin.Method{
		Type: plugin.Tool, Name: "export_data", Description: "导出数据文件",
		Doc: `Save data as exports/<filename> (this chat's) and hand a copy to the sandbox.

Args:
    data_content (str): the text to export.
    filename (str): a plain file name such as "table.csv".

Returns:
    str: "数据已导出: /app/shared/<filename>"; open that path to read it.

Example:
    msg = export_data("a,b\n1,2\n", "table.csv")
    print(open("/app/shared/table.csv").read())`,
	}, exportData)

	plugin.MountSandboxMethod(p, plugin.Method{
		Type: plugin.Behavior, Name: "download_model", Description: "下载模型",
		Doc: `Download a model file into the plugin's models/ and record its metadata.

Args:
    model_url (str): an http or https URL.
    model_name (str): a plain name; the file becomes models/<name>.model.

Returns:
    str: "模型 '<name>' 下载成功,大小: N 字节", or "下载失败: <reason>".

Example:
    download_model("https://example.com/tiny.bin", "tiny")`,
	}, downloadModel)

	plugin.MountSandboxMethod(p, plugin.Method{
		Type: plugin.Tool, Name: "load_model", Description: "加载模型",
		Doc: `Load a model downloaded with download_model.

Args:
    model_name (str): the name given to download_model.

Returns:
    str: "模型已加载: <name> (版本 1.0.0,大小 N 字节)", or
        "模型 '<name>' 不存在".

Example:
    print(load_model("tiny"))`,
	}, loadModel)

	plugin.MountSandboxMethod(p, plugin.Method{
		Type: plugin.Tool, Name: "process_image", Description: "处理用户上传的图片文件。",
		Doc: `Process an image file from the sandbox on the host.

Args:
    image_sandbox_path_str (str): the image's sandbox path, e.g.
        "/app/uploads/my_image.jpg".

Returns:
    str: "图片 '<name>' 处理成功。大小: N 字节。", or why it failed.

Example:
    print(process_image("/app/uploads/photo.jpg"))`,
	}, processImage)

	plugin.MountSandboxMethod(p, plugin.Method{
		Type: plugin.Tool, Name: "generate_report", Description: "生成一份报告并返回其沙盒路径。",
		Doc: `Write a report into the chat's uploads and return its sandbox path.

Args:
    report_data (str): the report's text.

Returns:
    str: e.g. "/app/uploads/report_1700000000.txt" (read-only to you).

Example:
    path = generate_report("Q3: revenue up 4%")
    print(open(path).read())`,
	}, generateReport)

	plugin.MountSandboxMethod(p, plugin.Method{
		Type: plugin.Tool, Name: "get_file_content", Description: "读取沙盒文件的内容。",
		Doc: `Return the text of a file in /app/uploads or /app/shared.

Args:
    sandbox_path_str (str): e.g. "/app/uploads/document.txt".

Returns:
    str: the file's content (UTF-8).

Example:
    text = get_file_content("/app/uploads/document.txt")`,
	}, getFileContent)

	plugin.Register(p)
}

// defaultConfig is what the init hook writes to config.json when it is
// missing.
var defaultConfig = map[string]any{"version": "1.0.0", "enabled": true, "cache_ttl": 3600}

// resourceDirs are the subdirectories the init hook prepares.
var resourceDirs = []string{"cache", "models", "exports", "temp", "user_uploads"}

// initPluginResources prepares the directory structure and a default
// config.json (seed 000's init_plugin_resources).
func initPluginResources(_ context.Context) error {
	root, err := p.DataRoot()
	if err != nil {
		return err
	}
	defer root.Close()
	for _, d := range resourceDirs {
		if err := root.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("prepare %s: %w", d, err)
		}
	}
	b, err := json.MarshalIndent(defaultConfig, "", "  ")
	if err != nil {
		return err
	}
	f, err := root.OpenFile("config.json", os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, fs.ErrExist) {
		return nil // keep the operator's config
	}
	if err != nil {
		return fmt.Errorf("default config: %w", err)
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return fmt.Errorf("default config: %w", err)
	}
	return f.Close()
}

// SaveLogArgs are save_log's parameters.
type SaveLogArgs struct {
	LogContent string `json:"log_content" jsonschema:"the text to save"`
}

func saveLog(ctx *plugin.Ctx, a SaveLogArgs) (string, error) {
	logs, err := chatRoot(ctx, "logs")
	if err != nil {
		return "", err
	}
	defer logs.Close()
	name := fmt.Sprintf("log_%d.txt", time.Now().UnixNano())
	if err := logs.WriteFile(name, []byte(a.LogContent), 0o644); err != nil {
		return "", err
	}
	return "日志已保存到 " + name, nil
}

// SaveImageArgs are save_image's parameters.
type SaveImageArgs struct {
	ImageData []byte `json:"image_data" jsonschema:"the image file's content"`
	Filename  string `json:"filename" jsonschema:"a plain file name such as cat.png"`
}

func saveImage(ctx *plugin.Ctx, a SaveImageArgs) (string, error) {
	images, err := chatRoot(ctx, "images")
	if err != nil {
		return "", err
	}
	defer images.Close()
	// The Root of images/ refuses "../config.json" as well as "/etc/x":
	// the AI's file name cannot reach the rest of the plugin's files.
	if err := checkNameLen(a.Filename); err != nil {
		return "", err
	}
	if err := images.WriteFile(a.Filename, a.ImageData, 0o644); err != nil {
		return "", fmt.Errorf("save image %q: %w", a.Filename, err)
	}
	return "图片已保存: images/" + a.Filename, nil
}

func readConfig(_ *plugin.Ctx, _ struct{}) (string, error) {
	root, err := p.DataRoot()
	if err != nil {
		return "", err
	}
	defer root.Close()
	b, err := root.ReadFile("config.json")
	if errors.Is(err, fs.ErrNotExist) {
		return "配置文件不存在", nil
	}
	if err != nil {
		return "", err
	}
	return "配置内容: " + string(b), nil
}

func listExports(ctx *plugin.Ctx, _ struct{}) (string, error) {
	root, err := p.DataRoot()
	if err != nil {
		return "", err
	}
	defer root.Close()
	if _, err := root.Stat("exports"); err != nil {
		return "导出目录不存在", nil
	}
	ents, err := fs.ReadDir(root.FS(), path.Join("exports", ctx.ContainerKey()))
	if errors.Is(err, fs.ErrNotExist) {
		return "暂无导出文件", nil // nothing exported in this chat yet
	}
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, e := range ents {
		if e.Type().IsRegular() {
			b.WriteString("\n- " + e.Name())
		}
	}
	if b.Len() == 0 {
		return "暂无导出文件", nil
	}
	return "导出文件列表:" + b.String(), nil
}

// URLArgs are cache_external_resource's parameters.
type URLArgs struct {
	URL string `json:"url" jsonschema:"an http or https URL"`
}

func cacheExternalResource(ctx *plugin.Ctx, a URLArgs) (string, error) {
	cache, err := subRoot("cache")
	if err != nil {
		return "", err
	}
	defer cache.Close()
	sum := md5.Sum([]byte(a.URL)) // a name, not a security boundary
	name := hex.EncodeToString(sum[:]) + ".cache"
	if fi, err := cache.Stat(name); err == nil {
		return fmt.Sprintf("已从缓存加载,大小: %d 字节", fi.Size()), nil
	}
	n, err := saveAtomic(cache, name, func(w io.Writer) (int64, error) {
		return ctx.FS().Download(ctx, a.URL, w)
	})
	if err != nil {
		return "下载失败: " + err.Error(), nil
	}
	return fmt.Sprintf("资源已下载,大小: %d 字节", n), nil
}

// CleanupArgs are cleanup_temp_files's parameters.
type CleanupArgs struct {
	MaxAgeHours int `json:"max_age_hours,omitempty" default:"24" jsonschema:"age limit in hours"`
}

func cleanupTempFiles(_ *plugin.Ctx, a CleanupArgs) (string, error) {
	temp, err := subRootIfExists("temp")
	if errors.Is(err, fs.ErrNotExist) {
		return "临时目录不存在", nil
	}
	if err != nil {
		return "", err
	}
	defer temp.Close()
	ents, err := fs.ReadDir(temp.FS(), ".")
	if err != nil {
		return "", err
	}
	cutoff := time.Now().Add(-time.Duration(a.MaxAgeHours) * time.Hour)
	deleted := 0
	var errs []error
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		fi, err := e.Info()
		if err != nil || !fi.ModTime().Before(cutoff) {
			continue
		}
		if err := temp.Remove(e.Name()); err != nil {
			errs = append(errs, err)
			continue
		}
		deleted++
	}
	msg := fmt.Sprintf("清理完成,删除了 %d 个文件", deleted)
	if len(errs) > 0 {
		msg += fmt.Sprintf("(%d 个删除失败: %v)", len(errs), errors.Join(errs...))
	}
	return msg, nil
}

// FilePathArgs are process_user_file's parameters.
type FilePathArgs struct {
	FilePath string `json:"file_path" jsonschema:"a sandbox path under /app/uploads/ or /app/shared/"`
}

func processUserFile(ctx *plugin.Ctx, a FilePathArgs) (string, error) {
	src, err := ctx.FS().Open(a.FilePath)
	if err != nil {
		return "", err
	}
	defer src.Close()
	uploads, err := chatRoot(ctx, "user_uploads")
	if err != nil {
		return "", err
	}
	defer uploads.Close()
	name := fmt.Sprintf("%d_%s", time.Now().Unix(), path.Base(a.FilePath))
	n, err := saveAtomic(uploads, name, func(w io.Writer) (int64, error) { return io.Copy(w, src) })
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("文件已处理并保存,大小: %d 字节", n), nil
}

// ExportArgs are export_data's parameters.
type ExportArgs struct {
	DataContent string `json:"data_content" jsonschema:"the text to export"`
	Filename    string `json:"filename" jsonschema:"a plain file name such as table.csv"`
}

func exportData(ctx *plugin.Ctx, a ExportArgs) (string, error) {
	exports, err := chatRoot(ctx, "exports")
	if err != nil {
		return "", err
	}
	defer exports.Close()
	if err := checkNameLen(a.Filename); err != nil {
		return "", err
	}
	if err := exports.WriteFile(a.Filename, []byte(a.DataContent), 0o644); err != nil {
		return "", fmt.Errorf("export %q: %w", a.Filename, err)
	}
	// Open through the Root, then forward the open file: no host path
	// travels, so nothing can redirect the copy.
	f, err := exports.Open(a.Filename)
	if err != nil {
		return "", err
	}
	defer f.Close()
	sp, err := ctx.FS().MixedForwardFile(ctx, f, a.Filename)
	if err != nil {
		return "", err
	}
	return "数据已导出: " + sp, nil
}

// ModelInfo is what download_model records in the KV store: the model's
// file stays in the data directory, its metadata in KV.
type ModelInfo struct {
	Name      string  `json:"name"`
	Version   string  `json:"version"`
	FilePath  string  `json:"file_path"` // relative to the plugin directory
	SizeBytes int64   `json:"size_bytes"`
	CreatedAt float64 `json:"created_at"`
}

// DownloadModelArgs are download_model's parameters.
type DownloadModelArgs struct {
	ModelURL  string `json:"model_url" jsonschema:"an http or https URL"`
	ModelName string `json:"model_name" jsonschema:"a plain name; the file becomes models/<name>.model"`
}

func downloadModel(ctx *plugin.Ctx, a DownloadModelArgs) (string, error) {
	models, err := subRoot("models")
	if err != nil {
		return "", err
	}
	defer models.Close()
	if err := checkNameLen(a.ModelName); err != nil {
		return "", err
	}
	file := a.ModelName + ".model"
	n, err := saveAtomic(models, file, func(w io.Writer) (int64, error) {
		return ctx.FS().Download(ctx, a.ModelURL, w)
	})
	if err != nil {
		return "下载失败: " + err.Error(), nil
	}
	info, err := json.Marshal(ModelInfo{
		Name: a.ModelName, Version: "1.0.0", FilePath: "models/" + file, SizeBytes: n,
		CreatedAt: float64(time.Now().UnixNano()) / 1e9,
	})
	if err != nil {
		return "", err
	}
	if _, err := ctx.Store().Set(ctx, plugin.Global(), "model_info:"+a.ModelName, string(info)); err != nil {
		return "", err
	}
	return fmt.Sprintf("模型 '%s' 下载成功,大小: %d 字节", a.ModelName, n), nil
}

// ModelNameArgs are load_model's parameters.
type ModelNameArgs struct {
	ModelName string `json:"model_name" jsonschema:"the name given to download_model"`
}

func loadModel(ctx *plugin.Ctx, a ModelNameArgs) (string, error) {
	raw, found, err := ctx.Store().Get(ctx, plugin.Global(), "model_info:"+a.ModelName)
	if err != nil {
		return "", err
	}
	if !found {
		return fmt.Sprintf("模型 '%s' 不存在", a.ModelName), nil
	}
	var info ModelInfo
	if err := json.Unmarshal([]byte(raw), &info); err != nil {
		return "", fmt.Errorf("model %s: bad metadata: %w", a.ModelName, err)
	}
	root, err := p.DataRoot()
	if err != nil {
		return "", err
	}
	defer root.Close()
	f, err := root.Open(info.FilePath)
	if errors.Is(err, fs.ErrNotExist) {
		return "模型文件不存在: " + info.FilePath, nil
	}
	if err != nil {
		return "", err
	}
	defer f.Close()
	// A real plugin would parse the model here; reading it proves it is
	// whole.
	n, err := io.Copy(io.Discard, f)
	if err != nil {
		return "", err
	}
	if n != info.SizeBytes {
		return "", fmt.Errorf("model %s: file has %d bytes, metadata says %d", a.ModelName, n, info.SizeBytes)
	}
	return fmt.Sprintf("模型已加载: %s (版本 %s,大小 %d 字节)", info.Name, info.Version, info.SizeBytes), nil
}

// ImagePathArgs are process_image's parameters.
type ImagePathArgs struct {
	ImageSandboxPathStr string `json:"image_sandbox_path_str" jsonschema:"the image's sandbox path, e.g. /app/uploads/my_image.jpg"`
}

func processImage(ctx *plugin.Ctx, a ImagePathArgs) (string, error) {
	f, err := ctx.FS().Open(a.ImageSandboxPathStr)
	switch {
	case errors.Is(err, plugin.ErrPathRefused):
		return "处理图片失败,路径无效: " + err.Error(), nil
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Sprintf("错误:文件 '%s' 未找到。", a.ImageSandboxPathStr), nil
	case err != nil:
		return "处理图片失败: " + err.Error(), nil
	}
	defer f.Close()
	// ... image processing would go here ...
	n, err := io.Copy(io.Discard, f)
	if err != nil {
		return "处理图片失败: " + err.Error(), nil
	}
	return fmt.Sprintf("图片 '%s' 处理成功。大小: %d 字节。", path.Base(a.ImageSandboxPathStr), n), nil
}

// ReportArgs are generate_report's parameters.
type ReportArgs struct {
	ReportData string `json:"report_data" jsonschema:"the report's text"`
}

func generateReport(ctx *plugin.Ctx, a ReportArgs) (string, error) {
	name := fmt.Sprintf("report_%d.txt", time.Now().Unix())
	// Seed 002 writes to convert_filename_to_access_path(name) and returns
	// convert_filename_to_sandbox_upload_path(name); Create of that
	// sandbox path does both in one rooted step.
	sp, err := ctx.FS().SandboxUploadPath(name)
	if err != nil {
		return "", err
	}
	f, err := ctx.FS().Create(sp)
	if err != nil {
		return "", err
	}
	if _, err := io.WriteString(f, a.ReportData); err != nil {
		f.Close()
		return "", err
	}
	if err := f.Close(); err != nil {
		return "", err
	}
	return sp, nil
}

// SandboxPathArgs are get_file_content's parameters.
type SandboxPathArgs struct {
	SandboxPathStr string `json:"sandbox_path_str" jsonschema:"e.g. /app/uploads/document.txt"`
}

func getFileContent(ctx *plugin.Ctx, a SandboxPathArgs) (string, error) {
	b, err := ctx.FS().ReadFile(a.SandboxPathStr)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// subRoot opens dir (created if missing) in the plugin's directory as its
// own Root, so names joined to it cannot reach its siblings.
func subRoot(dir string) (*os.Root, error) {
	root, err := p.DataRoot()
	if err != nil {
		return nil, err
	}
	defer root.Close()
	if err := root.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	return root.OpenRoot(dir)
}

// checkNameLen refuses a name longer than a file name can be before it
// reaches an os.Root: resolving a megabytes-long path of "a/a/a/..." costs
// seconds and hundreds of MiB, and the AI chooses these names.
func checkNameLen(name string) error {
	if len(name) > 255 {
		return fmt.Errorf("file name of %d bytes: at most 255", len(name))
	}
	return nil
}

// chatRoot opens dir/<chat>/ (created if missing) in the plugin's
// directory as its own Root: the part of dir that belongs to the calling
// chat. The documents' examples keep one images/, logs/, exports/ and
// user_uploads/ for everyone, so any chat could list and overwrite what
// another saved; here each chat has its own, named by its container key
// (a safe directory name, one per chat).
func chatRoot(ctx *plugin.Ctx, dir string) (*os.Root, error) {
	return subRoot(path.Join(dir, ctx.ContainerKey()))
}

// subRootIfExists opens dir in the plugin's directory as its own Root.
func subRootIfExists(dir string) (*os.Root, error) {
	root, err := p.DataRoot()
	if err != nil {
		return nil, err
	}
	defer root.Close()
	return root.OpenRoot(dir)
}

// saveAtomic writes name beneath r through a hidden temporary file that is
// renamed into place only when fill succeeds, so a failed or oversized
// download leaves nothing behind.
func saveAtomic(r *os.Root, name string, fill func(io.Writer) (int64, error)) (int64, error) {
	tmp := ".partial-" + rand.Text()
	f, err := r.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return 0, err
	}
	n, err := fill(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = r.Rename(tmp, name)
	}
	if err != nil {
		r.Remove(tmp)
		return 0, err
	}
	return n, nil
}
