// Package view_image is the built-in image viewer (nekro.view_image), a
// port of the reference's 查看图片: it lets a model without vision see
// images through the operator's vision model.
//
// view_image(images) (AGENT) sends the images, files of the sandbox
// (/app/shared, /app/uploads) or http(s) URLs, to the model group the
// settings name ("vision" by default: NEKRO_LLM_VISION_MODEL and its
// _BASE_URL, _API_KEY), and returns its description to the model.
//
// Deviations from the reference, which handed URLs to the vision model
// as they were and read paths with a lexical check that broke on
// /app/shared: URLs are downloaded by the host's guarded downloader
// (public addresses only, the operator's size cap and timeout, each
// redirect checked), paths are opened beneath the chat's directories
// (Ctx.FS), and both go to the model as data: URLs, after a check that
// the content is an image and within max_image_bytes.
package view_image

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/nekro-go/nekro/plugin"
)

var p = plugin.New(plugin.Meta{
	Name:        "View image",
	ModuleName:  "view_image",
	Author:      "nekro",
	Version:     "1.0.0",
	Description: "Lets a model without vision see images, described by the operator's vision model.",
})

// Settings choose the vision model and bound what is sent to it.
type Settings struct {
	VisionGroup   string `json:"vision_group" title:"Model group that looks at the images" description:"a group configured with NEKRO_LLM_<GROUP>_MODEL; if the chat model sees images itself, do not enable this plugin" required:"true"`
	Prompt        string `json:"prompt" title:"What the vision model is asked" multiline:"true" required:"true"`
	MaxImages     int    `json:"max_images" title:"Images per call at most" min:"1" max:"32"`
	MaxImageBytes int    `json:"max_image_bytes" title:"Largest image in bytes" min:"1024" max:"104857600"`
}

var settings = plugin.MountConfig(p, Settings{
	VisionGroup:   "vision",
	Prompt:        "Describe the content shown in this images in relatively detailed language.",
	MaxImages:     8,
	MaxImageBytes: 10 << 20,
})

func init() {
	plugin.MountSandboxMethod(p, plugin.Method{
		Type: plugin.Agent, Name: "view_image", Description: "图片观察工具",
		Doc: `Look at images: a vision model describes them to you.

Attention: do not look again at images whose content is already given in
the context.

Returns:
    str: the description of the images.

Example:
    view_image(["/app/uploads/photo.jpg", "https://example.com/chart.png"])`,
		// Downloads and a vision model answering about several images take
		// longer than most calls.
		Timeout: 3 * time.Minute,
	}, view)

	plugin.Register(p)
}

// ViewArgs are view_image's parameters.
type ViewArgs struct {
	Images []string `json:"images" jsonschema:"图片路径或在线url列表: paths under /app/shared or /app/uploads, or http(s) URLs"`
}

func view(ctx *plugin.Ctx, a ViewArgs) (string, error) {
	s := settings.Get()
	if len(a.Images) == 0 {
		return "", errors.New("images is empty: give at least one image path or URL")
	}
	if len(a.Images) > s.MaxImages {
		return "", fmt.Errorf("%d images at once is too many: at most %d", len(a.Images), s.MaxImages)
	}
	if s.VisionGroup == "" {
		return "", errors.New("no vision model group is set in view_image's settings (vision_group)")
	}
	parts := []plugin.ContentPart{plugin.TextPart(s.Prompt)}
	for i, src := range a.Images {
		data, err := load(ctx, src, s.MaxImageBytes)
		if err != nil {
			return "", err
		}
		mime := http.DetectContentType(data)
		if !strings.HasPrefix(mime, "image/") {
			return "", fmt.Errorf("%s is not an image (its content looks like %s)", src, mime)
		}
		parts = append(parts,
			plugin.TextPart(fmt.Sprintf("Image %d: %s", i+1, src)),
			plugin.ImagePart("data:"+mime+";base64,"+base64.StdEncoding.EncodeToString(data)))
	}
	answer, err := ctx.AskModel(s.VisionGroup, parts...)
	if err != nil {
		return "", fmt.Errorf("view_image: %w", err)
	}
	if strings.TrimSpace(answer) == "" {
		return "The vision model gave no description of the images.", nil
	}
	return "The visual description of the images is as follows:\n" + answer, nil
}

// load reads one image, at most limit bytes, from a URL or a sandbox path.
func load(ctx *plugin.Ctx, src string, limit int) ([]byte, error) {
	buf := &capped{limit: limit, name: src}
	if plugin.IsURL(src) {
		if _, err := ctx.FS().Download(ctx, src, buf); err != nil {
			return nil, err
		}
		return buf.buf.Bytes(), nil
	}
	f, err := ctx.FS().Open(src)
	if err != nil {
		return nil, fmt.Errorf("cannot open the image %s: %w", src, err)
	}
	defer f.Close()
	if _, err := io.Copy(buf, f); err != nil {
		return nil, fmt.Errorf("read %s: %w", src, err)
	}
	return buf.buf.Bytes(), nil
}

// capped is a writer into a buffer that refuses to grow past limit bytes.
// (It does not embed the buffer: io.Copy would use the buffer's ReadFrom
// and pass the cap by.)
type capped struct {
	buf   bytes.Buffer
	limit int
	name  string
}

func (c *capped) Write(b []byte) (int, error) {
	if c.buf.Len()+len(b) > c.limit {
		return 0, fmt.Errorf("the image %s is larger than %d bytes", c.name, c.limit)
	}
	return c.buf.Write(b)
}
