package basic

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/nekro-go/nekro/plugin"
)

// ViewArgs are view_str_content's parameters, as the reference's.
type ViewArgs struct {
	DataStr     string `json:"data_str" jsonschema:"the string to view"`
	StartLine   int    `json:"start_line,omitempty" default:"1" jsonschema:"first line, from 1"`
	EndLine     int    `json:"end_line,omitempty" default:"100" jsonschema:"last line, included"`
	MaxLen      int    `json:"max_len,omitempty" default:"4096" jsonschema:"most characters to return"`
	ShowLineNum bool   `json:"show_line_num,omitempty" default:"false" jsonschema:"number each line"`
}

// viewStrContent pages through a string, as the reference's pager does.
func viewStrContent(_ *plugin.Ctx, a ViewArgs) (string, error) {
	if a.DataStr == "" {
		return "⚠️ 数据为空，没有内容可查看。", nil
	}
	lines := strings.Split(strings.ReplaceAll(a.DataStr, "\r\n", "\n"), "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1] // as splitlines: no empty last line
	}
	total := len(lines)
	start, end := max(1, a.StartLine), min(total, a.EndLine)
	if start > total {
		return fmt.Sprintf("⚠️ 起始行号 %d 超出数据范围，数据共 %d 行。", start, total), nil
	}
	if start > end {
		return fmt.Sprintf("⚠️ 起始行号 (%d) 不能大于结束行号 (%d)。", start, end), nil
	}
	selected := lines[start-1 : end]
	if a.ShowLineNum {
		width := len(fmt.Sprint(end))
		for i := range selected {
			selected[i] = fmt.Sprintf("%*d| %s", width, start+i, selected[i])
		}
	}
	content := strings.Join(selected, "\n")
	maxLen := a.MaxLen
	if maxLen <= 0 {
		maxLen = 4096
	}
	truncated := false
	if utf8.RuneCountInString(content) > maxLen {
		content = string([]rune(content)[:maxLen])
		if i := strings.LastIndex(content, "\n"); i > len(content)/2 {
			content = content[:i]
		}
		truncated = true
	}
	meta := []string{fmt.Sprintf("📊 数据概览: 共 %d 行", total)}
	if start > 1 || end < total {
		meta = append(meta, fmt.Sprintf("当前显示: 第 %d-%d 行", start, end))
	}
	if truncated {
		meta = append(meta, "⚠️ 内容已截断，请缩小行范围或减少 max_len 查看完整内容")
	}
	if end < total {
		meta = append(meta, fmt.Sprintf("💡 查看下一页: view_str_content(your_str, start_line=%d, end_line=%d)", end+1, min(end+100, total)))
	}
	return strings.Join(meta, " | ") + "\n" + strings.Repeat("─", 60) + "\n" + content, nil
}
