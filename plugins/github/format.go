package github

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The events as the reference's handlers and pr_message render them.

const zeroSHA = "0000000000000000000000000000000000000000"

func obj(m map[string]any, key string) map[string]any {
	v, _ := m[key].(map[string]any)
	if v == nil {
		return map[string]any{}
	}
	return v
}

func arr(m map[string]any, key string) []any {
	v, _ := m[key].([]any)
	return v
}

// str is m[key] as text (a whole number too), or def.
func str(m map[string]any, key, def string) string {
	switch v := m[key].(type) {
	case string:
		return v
	case float64:
		if v == float64(int64(v)) {
			return strconv.FormatInt(int64(v), 10)
		}
	}
	return def
}

func num(m map[string]any, key string) int64 {
	v, _ := m[key].(float64)
	return int64(v)
}

func truthy(m map[string]any, key string) bool {
	v, _ := m[key].(bool)
	return v
}

// cut keeps the first n characters, adding "..." when it cut.
func cut(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n]) + "..."
}

func short(sha string) string {
	sha = strings.TrimSpace(sha)
	if len(sha) > 7 {
		return sha[:7]
	}
	return sha
}

func names(items []any, key string) []string {
	var out []string
	for _, it := range items {
		if m, ok := it.(map[string]any); ok {
			if n := strings.TrimSpace(str(m, key, "")); n != "" {
				out = append(out, n)
			}
		}
	}
	return out
}

func formatPush(repo string, b map[string]any) string {
	ref := strings.Replace(str(b, "ref", ""), "refs/heads/", "", 1)
	deleted, created, forced := str(b, "after", "") == zeroSHA, str(b, "before", "") == zeroSHA, truthy(b, "forced")
	commits := arr(b, "commits")
	var s strings.Builder
	s.WriteString("📢 GitHub 推送事件\n\n")
	fmt.Fprintf(&s, "仓库: %s\n推送者: %s\n", repo, str(obj(b, "pusher"), "name", "Unknown"))
	switch {
	case deleted:
		fmt.Fprintf(&s, "分支删除: %s\n", ref)
	case created:
		fmt.Fprintf(&s, "新分支: %s\n", ref)
	case forced:
		fmt.Fprintf(&s, "强制推送: %s\n", ref)
	default:
		fmt.Fprintf(&s, "分支: %s\n", ref)
	}
	fmt.Fprintf(&s, "提交数: %d\n", len(commits))
	if c := str(b, "compare", ""); c != "" && !deleted && !created {
		fmt.Fprintf(&s, "比较: %s\n", c)
	}
	switch {
	case deleted:
		s.WriteString("此分支已被删除\n")
	case forced:
		s.WriteString("这是一次强制推送，历史记录可能已被重写\n")
	case len(commits) > 0:
		s.WriteString("\n最近提交:\n")
		for i, c := range commits {
			if i == 3 {
				break
			}
			cm, _ := c.(map[string]any)
			if cm == nil {
				continue
			}
			first, _, _ := strings.Cut(str(cm, "message", ""), "\n")
			fmt.Fprintf(&s, "[%s] %s (作者: %s)\n", short(str(cm, "id", "")), first, str(obj(cm, "author"), "name", "Unknown"))
			added, modified, removed := len(arr(cm, "added")), len(arr(cm, "modified")), len(arr(cm, "removed"))
			if added+modified+removed > 0 {
				fmt.Fprintf(&s, "变更: +%d ~%d -%d 个文件\n", added, modified, removed)
			}
		}
	}
	return s.String()
}

func formatIssues(repo string, b map[string]any) string {
	action := str(b, "action", "unknown")
	is := obj(b, "issue")
	var s strings.Builder
	s.WriteString("📢 GitHub Issue 事件\n\n")
	fmt.Fprintf(&s, "仓库: %s\n动作: %s\n", repo, action)
	fmt.Fprintf(&s, "Issue #%s: %s\n", str(is, "number", "?"), str(is, "title", "无标题"))
	fmt.Fprintf(&s, "创建者: %s\n", str(obj(is, "user"), "login", "Unknown"))
	if str(is, "state", "") == "closed" {
		s.WriteString("状态: 已关闭\n")
	} else {
		s.WriteString("状态: 开放中\n")
	}
	if l := names(arr(is, "labels"), "name"); len(l) > 0 {
		fmt.Fprintf(&s, "标签: %s\n", strings.Join(l, ", "))
	}
	if m := str(obj(is, "milestone"), "title", ""); m != "" {
		fmt.Fprintf(&s, "里程碑: %s\n", m)
	}
	if a := names(arr(is, "assignees"), "login"); len(a) > 0 {
		fmt.Fprintf(&s, "分配给: %s\n", strings.Join(a, ", "))
	}
	fmt.Fprintf(&s, "链接: %s\n", str(is, "html_url", ""))
	body := str(is, "body", "")
	if body == "" {
		body = "无内容"
	}
	fmt.Fprintf(&s, "\n内容预览:\n%s\n", cut(body, 200))
	switch action {
	case "assigned":
		fmt.Fprintf(&s, "分配给: %s\n", str(obj(b, "assignee"), "login", "Unknown"))
	case "labeled":
		fmt.Fprintf(&s, "添加标签: %s\n", str(obj(b, "label"), "name", "Unknown"))
	}
	return s.String()
}

func formatRelease(repo string, b map[string]any) string {
	r := obj(b, "release")
	tag := str(r, "tag_name", "无标签")
	name := str(r, "name", "")
	if name == "" {
		name = tag
	}
	var s strings.Builder
	s.WriteString("📢 GitHub Release 事件\n\n")
	fmt.Fprintf(&s, "仓库: %s\n动作: %s\n版本: %s (%s)\n发布者: %s\n", repo, str(b, "action", "unknown"), name, tag,
		str(obj(r, "author"), "login", "Unknown"))
	switch {
	case truthy(r, "draft"):
		s.WriteString("状态: 草稿\n")
	case truthy(r, "prerelease"):
		s.WriteString("状态: 预发布版本\n")
	default:
		s.WriteString("状态: 正式发布\n")
	}
	if t := str(r, "target_commitish", ""); t != "" {
		fmt.Fprintf(&s, "目标: %s\n", t)
	}
	assets := arr(r, "assets")
	if len(assets) > 0 {
		fmt.Fprintf(&s, "资源文件数: %d\n", len(assets))
	}
	fmt.Fprintf(&s, "链接: %s\n", str(r, "html_url", ""))
	if len(assets) > 0 {
		s.WriteString("\n资源文件列表:\n")
		for i, a := range assets {
			if i == 3 {
				break
			}
			am, _ := a.(map[string]any)
			if am == nil {
				continue
			}
			size, sz := num(am, "size"), "未知"
			switch {
			case size <= 0:
			case size < 1024:
				sz = fmt.Sprintf("%d B", size)
			case size < 1<<20:
				sz = fmt.Sprintf("%.1f KB", float64(size)/1024)
			default:
				sz = fmt.Sprintf("%.1f MB", float64(size)/(1<<20))
			}
			fmt.Fprintf(&s, "%s (%s)\n", str(am, "name", "未命名"), sz)
		}
	}
	body := str(r, "body", "")
	if body == "" {
		body = "无内容"
	}
	fmt.Fprintf(&s, "\n发布说明:\n%s\n", cut(body, 200))
	return s.String()
}

func formatPullRequest(repo string, b map[string]any) string {
	action := str(b, "action", "unknown")
	pr := obj(b, "pull_request")
	creator := str(obj(pr, "user"), "login", "Unknown")
	actor := str(obj(b, "sender"), "login", creator)
	headline, detail, extra := describePR(action, pr, b, actor)
	lines := []string{
		fmt.Sprintf("📢 GitHub Pull Request #%s @ %s", str(pr, "number", "?"), repo),
		fmt.Sprintf("【%s】%s", headline, detail),
		"📌 " + str(pr, "title", "无标题"),
	}
	if u := str(pr, "html_url", ""); u != "" {
		lines = append(lines, "🔗 "+u)
	}
	head, base := obj(pr, "head"), obj(pr, "base")
	hb, bb := str(head, "ref", "unknown"), str(base, "ref", "unknown")
	ho, bo := str(obj(obj(head, "repo"), "owner"), "login", "Unknown"), str(obj(obj(base, "repo"), "owner"), "login", "Unknown")
	if ho == bo {
		lines = append(lines, fmt.Sprintf("🌿 [%s] <- [%s]", bb, hb))
	} else {
		lines = append(lines, fmt.Sprintf("🌿 [%s:%s] <- [%s:%s]", bo, bb, ho, hb))
	}
	stats := fmt.Sprintf("📊 变更: +%d/-%d (%d 个文件)", num(pr, "additions"), num(pr, "deletions"), num(pr, "changed_files"))
	if c := num(pr, "commits"); c > 0 {
		stats += fmt.Sprintf(" | %d 个提交", c)
	}
	lines = append(lines, stats)
	if l := names(arr(pr, "labels"), "name"); len(l) > 0 {
		preview := strings.Join(l[:min(5, len(l))], "，")
		if len(l) > 5 {
			preview += fmt.Sprintf(" 等 %d 个标签", len(l))
		}
		lines = append(lines, "🏷️ 标签: "+preview)
	}
	lines = append(lines, "👤 发起者: "+creator)
	if actor != creator {
		lines = append(lines, "👤 操作者: "+actor)
	}
	for _, e := range extra {
		lines = append(lines, "ℹ️ "+e)
	}
	if body := strings.TrimSpace(str(pr, "body", "")); body != "" && body != "无内容" {
		if utf8.RuneCountInString(body) > 180 {
			body = strings.TrimRight(string([]rune(body)[:180]), " \t\n") + "..."
		}
		lines = append(lines, "━━━━━━━━━━━━━━━━━━━━", "📝 内容预览:", body)
	}
	if sha := short(str(pr, "merge_commit_sha", "")); sha != "" {
		lines = append(lines, "🔀 合并提交: "+sha)
	}
	return strings.Join(lines, "\n")
}

func describePR(action string, pr, b map[string]any, actor string) (headline, detail string, extra []string) {
	reviewer := func(verb string) {
		if r := str(obj(b, "requested_reviewer"), "login", ""); r != "" {
			extra = append(extra, verb+"审查人: "+r)
		} else if t := str(obj(b, "requested_team"), "name", ""); t != "" {
			extra = append(extra, verb+"审查团队: "+t)
		}
	}
	switch action {
	case "closed":
		if truthy(pr, "merged") {
			by := str(obj(pr, "merged_by"), "login", "")
			if by == "" {
				by = actor
			}
			return "✅ 已合并", "由 " + by + " 合并", nil
		}
		return "❌ 已关闭", "由 " + actor + " 关闭，未合入目标分支", nil
	case "opened":
		return "🆕 新建", "由 " + actor + " 发起", nil
	case "reopened":
		return "🔄 重新开启", "由 " + actor + " 重新打开", nil
	case "synchronize":
		if sha := short(str(obj(pr, "head"), "sha", "")); sha != "" {
			extra = append(extra, "最新提交: "+sha)
		}
		return "🔁 提交更新", "由 " + actor + " 推送了新的提交", extra
	case "ready_for_review":
		return "👀 待审查", "由 " + actor + " 标记为可审查", nil
	case "converted_to_draft":
		return "📝 草稿", "由 " + actor + " 转为 Draft", nil
	case "review_requested":
		reviewer("请求")
		return "🙋 请求审查", "由 " + actor + " 发起审查请求", extra
	case "review_request_removed":
		reviewer("移除")
		return "➖ 移除审查", "由 " + actor + " 移除了审查请求", extra
	case "assigned", "unassigned":
		if a := str(obj(b, "assignee"), "login", ""); a != "" {
			extra = append(extra, map[bool]string{true: "指派给", false: "取消指派"}[action == "assigned"]+": "+a)
		}
		return map[bool]string{true: "👤 已指派", false: "👤 取消指派"}[action == "assigned"], "由 " + actor + " 更新了负责人", extra
	case "labeled", "unlabeled":
		if l := str(obj(b, "label"), "name", ""); l != "" {
			extra = append(extra, map[bool]string{true: "新增标签", false: "移除标签"}[action == "labeled"]+": "+l)
		}
		return "🏷️ 标签变更", "由 " + actor + " 更新了标签", extra
	case "edited":
		var fields []string
		for k := range obj(b, "changes") {
			fields = append(fields, k)
		}
		sort.Strings(fields)
		if len(fields) > 0 {
			extra = append(extra, "修改字段: "+strings.Join(fields, ", "))
		}
		return "✏️ 已编辑", "由 " + actor + " 修改了 PR 信息", extra
	case "locked":
		return "🔒 已锁定", "由 " + actor + " 更新了讨论状态", nil
	case "unlocked":
		return "🔓 已解锁", "由 " + actor + " 更新了讨论状态", nil
	case "auto_merge_enabled":
		return "🤖 自动合并已开启", "由 " + actor + " 更新了自动合并", nil
	case "auto_merge_disabled":
		return "🤖 自动合并已关闭", "由 " + actor + " 更新了自动合并", nil
	case "enqueued", "dequeued":
		if r := str(b, "reason", ""); r != "" {
			extra = append(extra, "原因: "+r)
		}
		return map[bool]string{true: "🚦 已加入合并队列", false: "🚦 已移出合并队列"}[action == "enqueued"], "由 " + actor + " 更新了合并队列状态", extra
	}
	return "📝 " + action, "由 " + actor + " 触发", nil
}
