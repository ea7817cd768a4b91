// Package sandboxmethods ports the sandbox-method examples of the plugin
// document "沙盒方法详解" (seed 004), one per method type, with the same
// Python-callable names: my_sum_function (TOOL), get_time (TOOL),
// search_kb (AGENT) and generate_image_with_comment (MULTIMODAL_AGENT).
// get_user_preference (seed 004, KV) lives in examples/kvstore and
// send_chat_message (BEHAVIOR) with the chat service.
package sandboxmethods

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"hash/fnv"
	"image"
	"image/color"
	"image/png"
	"sort"
	"strings"
	"time"

	"github.com/nekro-go/nekro/plugin"
)

var p = plugin.New(plugin.Meta{
	Name:        "Sandbox method examples",
	ModuleName:  "sandbox_methods",
	Author:      "nekro_examples",
	Version:     "1.0.0",
	Description: "The four sandbox method types, as the plugin documents show them.",
})

func init() {
	plugin.MountSandboxMethod(p, plugin.Method{
		Type: plugin.Tool, Name: "my_sum_function", Description: "计算两个数字的和。",
		Doc: `计算并返回两个整数的和。

Args:
    num1 (int): 第一个加数。
    num2 (int): 第二个加数。

Returns:
    int: 两个数字的和。

Example:
    total = my_sum_function(2, 3)  # 5`,
	}, mySum)

	plugin.MountSandboxMethod(p, plugin.Method{
		Type: plugin.Tool, Name: "get_time", Description: "获取当前的日期和时间。",
		Doc: `Return the current date and time in ISO 8601 format (host clock, UTC).

Returns:
    str: e.g. "2026-11-22T01:38:25.123456Z".

Example:
    now = get_time()
    print(now)`,
	}, getTime)

	plugin.MountSandboxMethod(p, plugin.Method{
		Type: plugin.Agent, Name: "search_kb", Description: "根据关键词搜索内部知识库并返回相关信息。",
		Doc: `Search the internal knowledge base and hand the findings back to you.

This ends the run: you get the result in a new round and answer from it.

Args:
    query (str): keywords to search for.

Returns:
    str: the matching entries, or a note that nothing matched.

Example:
    search_kb("sandbox")`,
	}, searchKB)

	plugin.MountSandboxMethod(p, plugin.Method{
		Type: plugin.MultimodalAgent, Name: "generate_image_with_comment",
		Description: "生成一张关于特定主题的图片,并附带一句评论。",
		Doc: `Draw a picture about a topic and hand it back to you with a comment.

This ends the run: you see the image in a new round.

Args:
    topic (str): what the picture is about.

Returns:
    list: a text part with the comment and an image part (PNG data URL).

Example:
    generate_image_with_comment("sunset")`,
	}, generateImage)

	plugin.Register(p)
}

// SumArgs are my_sum_function's parameters.
type SumArgs struct {
	Num1 int `json:"num1" jsonschema:"第一个加数"`
	Num2 int `json:"num2" jsonschema:"第二个加数"`
}

func mySum(_ *plugin.Ctx, a SumArgs) (int, error) { return a.Num1 + a.Num2, nil }

func getTime(_ *plugin.Ctx, _ struct{}) (string, error) {
	return time.Now().UTC().Format(time.RFC3339Nano), nil
}

// knowledgeBase is a small real knowledge base: search_kb ranks its entries
// by how many query words they contain.
var knowledgeBase = []struct{ Title, Text string }{
	{"Sandbox", "AI code runs in a bubblewrap sandbox: no network, /app/shared read-write, /app/uploads read-only."},
	{"Method types", "TOOL returns to the code; AGENT ends the run and starts a new round; BEHAVIOR records a system message; MULTIMODAL_AGENT returns text and images for a new round."},
	{"KV store", "Plugins store strings per chat, per user or plugin-wide, with atomic updates."},
	{"File bridge", "Plugins read the sandbox's files through rooted handles, so hostile paths cannot escape."},
	{"Timeouts", "A run that exceeds its time limit is killed with its whole process tree and ends as TIMEOUT."},
}

// QueryArgs are search_kb's parameters.
type QueryArgs struct {
	Query string `json:"query" jsonschema:"keywords to search for"`
}

func searchKB(_ *plugin.Ctx, a QueryArgs) (string, error) {
	words := strings.Fields(strings.ToLower(a.Query))
	if len(words) == 0 {
		return "", fmt.Errorf("query is empty: pass one or more keywords")
	}
	type hit struct {
		i, score int
	}
	var hits []hit
	for i, e := range knowledgeBase {
		text := strings.ToLower(e.Title + " " + e.Text)
		score := 0
		for _, w := range words {
			score += strings.Count(text, w)
		}
		if score > 0 {
			hits = append(hits, hit{i, score})
		}
	}
	if len(hits) == 0 {
		return fmt.Sprintf("在知识库中没有找到与 '%s' 相关的信息。", a.Query), nil
	}
	sort.SliceStable(hits, func(x, y int) bool { return hits[x].score > hits[y].score })
	var b strings.Builder
	fmt.Fprintf(&b, "关于 '%s' 的知识库搜索结果如下:\n", a.Query)
	for _, h := range hits {
		fmt.Fprintf(&b, "- %s: %s\n", knowledgeBase[h.i].Title, knowledgeBase[h.i].Text)
	}
	return b.String(), nil
}

// TopicArgs are generate_image_with_comment's parameters.
type TopicArgs struct {
	Topic string `json:"topic" jsonschema:"what the picture is about"`
}

// generateImage draws a real PNG: a gradient whose colours come from a hash
// of the topic, so each topic has its own picture.
func generateImage(_ *plugin.Ctx, a TopicArgs) ([]plugin.ContentPart, error) {
	h := fnv.New32a()
	h.Write([]byte(a.Topic))
	seed := h.Sum32()
	const w, ht = 64, 64
	img := image.NewRGBA(image.Rect(0, 0, w, ht))
	r0, g0, b0 := uint8(seed), uint8(seed>>8), uint8(seed>>16)
	for y := range ht {
		for x := range w {
			img.Set(x, y, color.RGBA{r0 + uint8(x*2), g0 + uint8(y*2), b0 + uint8((x + y)), 255})
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		return nil, fmt.Errorf("encode png: %w", err)
	}
	return []plugin.ContentPart{
		plugin.TextPart(fmt.Sprintf("这是一张关于 '%s' 的图片。", a.Topic)),
		plugin.ImagePart("data:image/png;base64," + base64.StdEncoding.EncodeToString(buf.Bytes())),
	}, nil
}
