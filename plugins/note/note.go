// Package note is the built-in plugin nekro.note, a port of the reference's
// note plugin: the AI's long-term memory for one chat. Its code records
// facts as titled notes (set_note), reads one back in full (get_note) and
// drops those no longer true (remove_note); every turn of the chat shows
// its notes in the prompt, so they outlive the scrolling history window.
//
// Deviations from the reference, each on purpose:
//
//   - A chat key other than the run's own is refused with an error telling
//     the code to pass _ck. The reference acted on any chat key the code
//     named, so one chat's code could read and rewrite another's notes.
//   - set_note and remove_note change the chat's notes with Store.Update,
//     atomically: two runs writing notes at once both keep their note (the
//     reference read, changed and wrote back the whole map, and the later
//     write dropped the earlier one's note).
//   - set_note and remove_note, BEHAVIOR methods, return a sentence saying
//     what changed (SDK rule: a BEHAVIOR returns a string); the reference's
//     set_note returned True, recorded in the chat as the message "True".
//   - An empty title is refused, and remove_note's fuzzy fallback (a part
//     of a title) acts only when one note matches: the reference removed
//     the first of several, and remove_note(chat_key, "") removed the
//     chat's oldest note.
//   - The injected text keeps within the host's 4 KiB per plugin, which
//     would otherwise cut it mid-note: when the latest
//     NOTE_DETAIL_INJECT_LIMIT notes in full and every older title do not
//     fit, fewer notes are detailed; when the titles alone do not fit, the
//     latest five are detailed and the oldest titles left out, counted.
//     The reference had no bound. Titles over 100 characters show their
//     start.
//   - Times past a day read "1d 02:03:04" (the reference's %H:%M:%S
//     wrapped at 24 hours).
//
// As in the reference, a chat's notes outlive a reset of the chat: they
// are its long-term memory.
package note

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/nekro-go/nekro/plugin"
)

var p = plugin.New(plugin.Meta{
	Name:        "Notes",
	ModuleName:  "note",
	Author:      "nekro",
	Version:     "1.0.0",
	Description: "Long-term notes of a chat: set, read and remove them; each turn's prompt lists the chat's notes.",
})

// Settings are the reference's NoteConfig, under the same names.
type Settings struct {
	MaxNoteLength   int     `json:"MAX_NOTE_LENGTH" title:"Longest note shown in full" description:"a longer note shows its start and end in the prompt; get_note reads it whole" min:"8"`
	CleanThreshold  int     `json:"NOTE_PROMPT_CLEAN_THRESHOLD" title:"Notes before a clean-up hint" description:"with more notes than this the prompt asks the AI to remove expired or useless ones" min:"0"`
	DetailLimit     int     `json:"NOTE_DETAIL_INJECT_LIMIT" title:"Notes shown in detail" description:"the latest notes shown with their content; older ones show only their title" min:"0"`
	DedupSimilarity float64 `json:"NOTE_DEDUP_SIMILARITY" title:"Title similarity that replaces a note" description:"a new note whose title is more similar than this (0 to 1) to an existing note's replaces it" min:"0" max:"1"`
}

var settings = plugin.MountConfig(p, Settings{
	MaxNoteLength: 72, CleanThreshold: 12, DetailLimit: 50, DedupSimilarity: 0.7,
})

// storeKey holds a chat's notes, in the chat's scope, as the reference
// keeps them: one JSON value for the whole chat.
const storeKey = "note"

// maxInject is what the prompt text may take: the host cuts a plugin's
// injection at 4 KiB, and a cut would lose the end of a note silently.
const maxInject = 4000

// SetArgs are set_note's parameters.
type SetArgs struct {
	ChatKey     string `json:"chat_key" jsonschema:"the chat's key; always pass _ck (other chats are refused)"`
	Title       string `json:"title" jsonschema:"Note Title (Update following arguments if specified title already exists; similar titles will be deduplicated)"`
	Description string `json:"description" jsonschema:"Detailed Description (Recommend format: \"[tag] ...(effect description)\")"`
	Duration    int64  `json:"duration,omitempty" default:"0" jsonschema:"Duration (seconds, 0 means infinite, default is 0)"`
}

// GetArgs are get_note's parameters.
type GetArgs struct {
	ChatKey string `json:"chat_key" jsonschema:"the chat's key; always pass _ck (other chats are refused)"`
	Title   string `json:"title" jsonschema:"Note Title (supports fuzzy match)"`
}

// RemoveArgs are remove_note's parameters.
type RemoveArgs struct {
	ChatKey string `json:"chat_key" jsonschema:"the chat's key; always pass _ck (other chats are refused)"`
	Title   string `json:"title" jsonschema:"Note Title to be removed (e.g. \"心情愉悦\"; exact, or a part matching one note only)"`
}

func init() {
	plugin.MountSandboxMethod(p, plugin.Method{
		Type: plugin.Tool, Name: "get_note", Description: "获取笔记",
		Doc: `Get Note

Retrieve the full content of a note by title. Use this for older notes that
only show titles in the prompt, or for notes that are too long and got
truncated.

**IMPORTANT**: Results are NOT preserved across execution rounds. You MUST
call get_note AND use the result (e.g. in send_msg_text) in the SAME code
block. Do NOT call get_note alone expecting to use it later.

Returns:
    str: Note Content (empty string if no note matches)

Example:
    # You can also use Note System as a K-V database
    import json
    if not get_note(_ck, "some_data"):
        set_note(_ck, "some_data", "{}", 0)
        set_note(_ck, "some_data_schema", "...", 0) # save a structure description note for reference
    data = json.loads(get_note(_ck, "some_data"))
    data["xxx"] = "xxx"
    set_note(_ck, "some_data", json.dumps(data, ensure_ascii=False), 0)`,
	}, getNote)

	plugin.MountSandboxMethod(p, plugin.Method{
		Type: plugin.Behavior, Name: "set_note", Description: "设置状态笔记",
		Doc: `Set Note (适用于 "外观外貌"、"身体"、"心理"、"物品" 等效果)

**Attention**: ALL the chat records you see are a **SCROLLING WINDOW** with a
length limit, so make sure to remember the important information, otherwise
it will be lost! This is the **MOST RECOMMENDED** way to manage persistent
information.

Note: If a note with a very similar title already exists, it is replaced
(deduplication).

Returns:
    str: what was set (and which similar note it replaced)

Example:
    # 由于某种原因，你变得 "开心"
    set_note(_ck, "心情愉悦", "[效果] 因为 ...(事件发生) 而感到开心, ...(更多效果描述)", 60*60)
    # 由于摔倒，你的手臂受伤了
    set_note(_ck, "手臂受伤", "[效果] 因为摔倒而受伤，情况很严重，需要及时治疗")

    # 维护一些自己或用户的状态变量
    set_note(_ck, "正在维护xxx的财务状况", "[规则] 我正在维护xxx的财务状况, 使用...如果... (design and record very detail scene to keep remember operation rules)")
    last_money_yuan = 50
    spend_money_yuan = 10
    if last_money_yuan - spend_money_yuan > 0:
        set_note(_ck, "xxx的财务状况", f"[变量] 剩余 {last_money_yuan - spend_money_yuan} 元")

    # 记录关键信息
    set_note(_ck, "xxx的电子邮箱", "[记忆] xxx@qq.com")`,
	}, setNote)

	plugin.MountSandboxMethod(p, plugin.Method{
		Type: plugin.Behavior, Name: "remove_note", Description: "移除状态笔记",
		Doc: `Remove Note

Returns:
    str: which note was removed (an error if none matches)

Example:
    # 由于某种原因，"心情愉悦" 效果不再符合当前场景
    remove_note(_ck, "心情愉悦")`,
	}, removeNote)

	p.OnPromptInject(injectNotes)
	plugin.Register(p)
}

// ownChat refuses a chat key other than the run's, as plugins/basic does.
func ownChat(ctx *plugin.Ctx, key string) error {
	if key != ctx.ChatKey() {
		return fmt.Errorf("chat_key %q is not this chat: notes are only read and written in the chat the code runs for, so pass _ck", key)
	}
	return nil
}

func nonEmptyTitle(title string) error {
	if strings.TrimSpace(title) == "" {
		return errors.New("title is empty: name the note")
	}
	return nil
}

// entry is one note, with the reference's fields.
type entry struct {
	Title       string `json:"title"`
	Description string `json:"description"`
	Duration    int64  `json:"duration"`    // seconds; 0 means no expiry
	StartTime   int64  `json:"start_time"`  // Unix seconds of the last set
	ExpireTime  int64  `json:"expire_time"` // Unix seconds; 0 means none
}

// book is a chat's notes in the order they were first set (the order the
// reference's dict kept, which its fuzzy lookups go by).
type book struct {
	Notes []entry `json:"notes"`
}

func parseBook(raw string, found bool) (book, error) {
	var b book
	if !found || raw == "" {
		return b, nil
	}
	if err := json.Unmarshal([]byte(raw), &b); err != nil {
		return b, fmt.Errorf("the chat's stored notes are unreadable: %w", err)
	}
	return b, nil
}

func (b book) encode() (string, error) {
	raw, err := json.Marshal(b)
	return string(raw), err
}

// normalize is the reference's fuzzy form of a title: no spaces, no < >.
func normalize(s string) string {
	return strings.NewReplacer(" ", "", "<", "", ">", "").Replace(s)
}

// find returns the index of the note titled title, else of the notes whose
// title contains it (fuzzy form), in order.
func (b book) find(title string) (exact int, fuzzy []int) {
	for i, n := range b.Notes {
		if n.Title == title {
			return i, nil
		}
	}
	q := normalize(title)
	for i, n := range b.Notes {
		if q != "" && strings.Contains(normalize(n.Title), q) {
			fuzzy = append(fuzzy, i)
		}
	}
	return -1, fuzzy
}

// set adds n, or replaces the note with its title, or else the note whose
// title is most similar above threshold (the reference's de-duplication).
// It returns the title of the similar note replaced, if any.
func (b *book) set(n entry, threshold float64) (replaced string) {
	best, bestScore := -1, 0.0
	for i, old := range b.Notes {
		if old.Title == n.Title {
			b.Notes[i] = n // keeps its place, as a dict assignment does
			return ""
		}
		if s := titleSimilarity(n.Title, old.Title); s > threshold && s > bestScore {
			best, bestScore = i, s
		}
	}
	if best >= 0 {
		replaced = b.Notes[best].Title
		b.Notes = slices.Delete(b.Notes, best, best+1)
	}
	b.Notes = append(b.Notes, n)
	return replaced
}

func setNote(ctx *plugin.Ctx, a SetArgs) (string, error) {
	if err := ownChat(ctx, a.ChatKey); err != nil {
		return "", err
	}
	if err := nonEmptyTitle(a.Title); err != nil {
		return "", err
	}
	now := time.Now().Unix()
	n := entry{Title: a.Title, Description: a.Description, StartTime: now}
	if a.Duration > 0 {
		n.Duration, n.ExpireTime = a.Duration, now+a.Duration
	}
	threshold := settings.Get().DedupSimilarity
	var replaced string
	_, err := ctx.Store().Update(ctx, ctx.ChatScope(), storeKey, func(cur string, found bool) (string, error) {
		b, err := parseBook(cur, found)
		if err != nil {
			return "", err
		}
		replaced = b.set(n, threshold)
		return b.encode()
	})
	if err != nil {
		return "", fmt.Errorf("set note %q: %w", a.Title, err)
	}
	// replaced is read only after Update succeeded: fn has returned.
	if replaced != "" {
		return fmt.Sprintf("Note `%s` set (it replaced the similar note `%s`)", a.Title, replaced), nil
	}
	return fmt.Sprintf("Note `%s` set", a.Title), nil
}

func getNote(ctx *plugin.Ctx, a GetArgs) (string, error) {
	if err := ownChat(ctx, a.ChatKey); err != nil {
		return "", err
	}
	if err := nonEmptyTitle(a.Title); err != nil {
		return "", err
	}
	raw, found, err := ctx.Store().Get(ctx, ctx.ChatScope(), storeKey)
	if err != nil {
		return "", fmt.Errorf("get note %q: %w", a.Title, err)
	}
	b, err := parseBook(raw, found)
	if err != nil {
		return "", err
	}
	exact, fuzzy := b.find(a.Title)
	switch {
	case exact >= 0:
		return b.Notes[exact].Description, nil
	case len(fuzzy) > 0:
		return b.Notes[fuzzy[0]].Description, nil
	}
	return "", nil
}

// errNotFound is remove_note's answer when no note matches; Update writes
// nothing then.
var errNotFound = errors.New("not found")

func removeNote(ctx *plugin.Ctx, a RemoveArgs) (string, error) {
	if err := ownChat(ctx, a.ChatKey); err != nil {
		return "", err
	}
	if err := nonEmptyTitle(a.Title); err != nil {
		return "", err
	}
	var removed string
	var candidates []string
	_, err := ctx.Store().Update(ctx, ctx.ChatScope(), storeKey, func(cur string, found bool) (string, error) {
		b, err := parseBook(cur, found)
		if err != nil {
			return "", err
		}
		i, fuzzy := b.find(a.Title)
		if i < 0 && len(fuzzy) == 1 {
			i = fuzzy[0]
		}
		if i < 0 {
			for _, j := range fuzzy {
				candidates = append(candidates, b.Notes[j].Title)
			}
			return "", errNotFound
		}
		removed = b.Notes[i].Title
		b.Notes = slices.Delete(b.Notes, i, i+1)
		return b.encode()
	})
	switch {
	case errors.Is(err, errNotFound) && len(candidates) > 0:
		return "", fmt.Errorf("note `%s` is not a title, and it is part of %d titles: %s; remove one by its exact title",
			a.Title, len(candidates), quoteTitles(candidates))
	case errors.Is(err, errNotFound):
		return "", fmt.Errorf("note `%s` not found. Make sure the spelling is correct!", a.Title)
	case err != nil:
		return "", fmt.Errorf("remove note %q: %w", a.Title, err)
	}
	return fmt.Sprintf("Note `%s` removed", removed), nil
}

func quoteTitles(titles []string) string {
	q := make([]string, len(titles))
	for i, t := range titles {
		q[i] = "`" + t + "`"
	}
	return strings.Join(q, ", ")
}

// injectNotes puts the chat's notes into the turn's prompt.
func injectNotes(ctx *plugin.Ctx) (string, error) {
	raw, found, err := ctx.Store().Get(ctx, ctx.ChatScope(), storeKey)
	if err != nil {
		return "", err
	}
	b, err := parseBook(raw, found)
	if err != nil {
		return "", err
	}
	return render(b, settings.Get(), time.Now()), nil
}

// render is the reference's prompt: the notes oldest first, the latest
// DetailLimit with their content and time, older ones by title only, and a
// hint to clean up past CleanThreshold notes. Within maxInject: fewer
// notes are detailed when all would not fit with every older title; when
// even the titles alone do not fit, the latest few notes are detailed and
// the oldest titles left out, with their number.
func render(b book, s Settings, now time.Time) string {
	if len(b.Notes) == 0 {
		return promptHead + "No notes. (use `set_note` to add one)"
	}
	notes := slices.Clone(b.Notes)
	sort.SliceStable(notes, func(i, j int) bool { return notes[i].StartTime < notes[j].StartTime })
	warning := ""
	if len(notes) > s.CleanThreshold {
		warning = "\nWarning: You have too many notes. (use `remove_note` to remove some expired or useless notes)"
	}
	detail := min(max(s.DetailLimit, 0), len(notes))
	for d := detail; d >= 0; d-- {
		if text, left := compose(notes, d, s, now, warning); left == 0 {
			return text
		}
	}
	for d := min(detail, keepDetailed); d >= 0; d-- {
		if text, left := compose(notes, d, s, now, warning); left >= 0 {
			return text
		}
	}
	return promptHead + "(too long to show; use `get_note(_ck, title)`)" + warning // not reached: no detail always fits
}

const promptHead = "Current Notes:\n"

// keepDetailed is how many of the latest notes stay detailed when older
// titles have to be left out.
const keepDetailed = 5

// compose renders notes with the latest d detailed and the older ones by
// title, leaving out the oldest titles that would pass maxInject. It
// returns how many titles it left out, or -1 when the details alone do
// not fit.
func compose(notes []entry, d int, s Settings, now time.Time, warning string) (string, int) {
	older, recent := notes[:len(notes)-d], notes[len(notes)-d:]
	var details strings.Builder
	if len(older) > 0 && d > 0 {
		fmt.Fprintf(&details, "\n[Recent notes (%d items, full details)]\n", d)
	}
	for _, n := range recent {
		details.WriteString(renderDetail(n, s, now))
	}
	if len(older) == 0 {
		text := promptHead + strings.TrimRight(details.String(), "\n") + warning
		if len(text) > maxInject {
			return "", -1
		}
		return text, 0
	}
	header := fmt.Sprintf("[Older notes (%d items — ONLY TITLES SHOWN. You MUST call `get_note(_ck, title)` to retrieve full content before referencing any of these notes.)]\n", len(older))
	const omitted = "  (%d older titles not shown)\n"
	budget := maxInject - len(promptHead) - len(header) - len(omitted) - 8 - details.Len() - len(warning)
	if budget < 0 {
		return "", -1
	}
	titles := make([]string, len(older))
	for i, n := range older {
		titles[i] = renderTitle(n, now)
	}
	kept := latestFitting(titles, budget)
	var b strings.Builder
	b.WriteString(promptHead + header)
	left := len(older) - len(kept)
	if left > 0 {
		fmt.Fprintf(&b, omitted, left)
	}
	for _, t := range kept {
		b.WriteString(t + "\n")
	}
	b.WriteString(details.String())
	return strings.TrimRight(b.String(), "\n") + warning, left
}

// latestFitting keeps the last lines of lines whose total (with newlines)
// fits budget bytes.
func latestFitting(lines []string, budget int) []string {
	used, i := 0, len(lines)
	for i > 0 && used+len(lines[i-1])+1 <= budget {
		used += len(lines[i-1]) + 1
		i--
	}
	return lines[i:]
}

func renderDetail(n entry, s Settings, now time.Time) string {
	age := now.Sub(time.Unix(n.StartTime, 0))
	var expiry string
	switch remaining := time.Unix(n.ExpireTime, 0).Sub(now); {
	case n.Duration > 0 && remaining > 0:
		expiry = "expires in " + clock(remaining)
	case n.Duration > 0:
		expiry = "expired " + clock(-remaining) + " ago (use `remove_note` to remove it)"
	default:
		expiry = "no expiry"
	}
	return fmt.Sprintf("* note_title: %s\n  note_description: %s\n  time: (started %s ago. %s)\n",
		shownTitle(n.Title),
		plugin.EscapePrompt(shorten(n.Description, s.MaxNoteLength, "...(note too long, use `get_note` to get the full note...)")),
		clock(age), expiry)
}

func renderTitle(n entry, now time.Time) string {
	age := now.Sub(time.Unix(n.StartTime, 0))
	brief := "recent"
	if days := int(age.Hours() / 24); days > 0 {
		brief = fmt.Sprintf("%dd ago", days)
	} else if hours := int(age.Hours()); hours > 0 {
		brief = fmt.Sprintf("%dh ago", hours)
	}
	return fmt.Sprintf("  - %s (%s)", shownTitle(n.Title), brief)
}

// maxTitleShown bounds a title in the prompt (the reference showed titles
// whole): a longer one shows its start, which get_note's fuzzy match finds.
const maxTitleShown = 100

// shownTitle is title as the prompt shows it: escaped (plugin.EscapePrompt),
// its start only when it is long.
func shownTitle(title string) string {
	if utf8.RuneCountInString(title) <= maxTitleShown {
		return plugin.EscapePrompt(title)
	}
	return plugin.EscapePrompt(string([]rune(title)[:maxTitleShown])) + "…(title cut)"
}

// shorten keeps text shorter than limit characters whole, and otherwise
// its first limit/2 and last limit/2 characters (rounded up) around
// marker, as the reference does.
func shorten(text string, limit int, marker string) string {
	if utf8.RuneCountInString(text) < limit || limit <= 0 {
		return text
	}
	r := []rune(text)
	return string(r[:limit/2]) + marker + string(r[len(r)-(limit+1)/2:])
}

// clock is the reference's %H:%M:%S of a duration, with the days in front
// once it reaches one (the reference wrapped at 24 hours).
func clock(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	sec := int64(d / time.Second)
	days, sec := sec/86400, sec%86400
	hms := fmt.Sprintf("%02d:%02d:%02d", sec/3600, sec%3600/60, sec%60)
	if days > 0 {
		return fmt.Sprintf("%dd %s", days, hms)
	}
	return hms
}
