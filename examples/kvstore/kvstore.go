// Package kvstore ports the KV examples of the plugin documents "数据存储"
// (seed 000) and "データストレージ" (seed 001), and get_user_preference of
// "沙盒方法详解" (seed 004), with the same Python-callable names:
// save_preference, get_preference, clear_cache, add_note, get_note and
// get_user_preference, plus the migrate_data init hook and the on_reset
// channel-reset hook. (download_model and load_model, which combine KV and
// files, come with the file examples.)
//
// The methods answer with the seeds' strings. Two things differ from the
// reference, on purpose:
//   - the user's scope is the run's user (the reference's from_user_id is
//     always empty inside sandbox methods, so its user-scoped storage never
//     worked); a run without a user gets a clear error instead;
//   - add_note uses Store.Update, so two notes added at the same time are
//     both kept (the seeds' get-then-set loses one of them);
//   - get_user_preference keeps seed 004's signature (user_id,
//     preference_key) but reads only the run's own user: user_id comes from
//     the AI, and honouring it would let any chat read any user's data. A
//     user_id other than the run's user is refused with an error.
package kvstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nekro-go/nekro/plugin"
)

var p = plugin.New(plugin.Meta{
	Name:        "KV store examples",
	ModuleName:  "kvstore",
	Author:      "nekro_examples",
	Version:     "2.0.0",
	Description: "Preferences, notes and caches in the plugin KV store, as the plugin documents show them.",
})

func init() {
	plugin.MountSandboxMethod(p, plugin.Method{
		Type: plugin.Tool, Name: "save_preference", Description: "保存用户偏好",
		Doc: `保存用户偏好设置。

Saves this chat's last command, the current user's preferences (shared by
every chat the user writes from) and the plugin's last-update time.

Args:
    key (str): preference name.
    value (str): preference value.

Returns:
    str: "偏好设置已保存".

Example:
    save_preference("theme", "dark")`,
	}, savePreference)

	plugin.MountSandboxMethod(p, plugin.Method{
		Type: plugin.Tool, Name: "get_preference", Description: "获取用户偏好",
		Doc: `获取用户偏好设置。

Returns the current user's preferences, or the defaults
{'theme': 'light', 'notifications': False} when the user saved none.

Args:
    key (str): preference name.

Returns:
    str: e.g. "偏好: {'theme': 'dark', 'notifications': True}".

Example:
    print(get_preference("theme"))`,
	}, getPreference)

	plugin.MountSandboxMethod(p, plugin.Method{
		Type: plugin.Behavior, Name: "clear_cache", Description: "清除缓存",
		Doc: `清除会话缓存数据。

Deletes this chat's session cache and the current user's old setting.

Returns:
    str: "缓存已清除".

Example:
    clear_cache()`,
	}, clearCache)

	plugin.MountSandboxMethod(p, plugin.Method{
		Type: plugin.Behavior, Name: "add_note", Description: "添加笔记",
		Doc: `为当前用户添加笔记。

The user's notes are one value, updated atomically: notes added at the same
time are all kept. A note with an existing id replaces it.

Args:
    note_id (str): the note's id.
    title (str): its title.
    content (str): its text.
    tags_str (str): comma-separated tags, e.g. "work,todo". Optional.

Returns:
    str: "笔记 '<title>' 已添加,ID: <note_id>".

Example:
    add_note("n1", "Shopping", "milk, eggs", "home")`,
	}, addNote)

	plugin.MountSandboxMethod(p, plugin.Method{
		Type: plugin.Tool, Name: "get_note", Description: "获取笔记",
		Doc: `获取指定 ID 的笔记内容。

Args:
    note_id (str): the note's id.

Returns:
    str: "标题: ...\n内容: ...\n标签: a, b", or a sentence saying there is
    no such note.

Example:
    print(get_note("n1"))`,
	}, getNote)

	plugin.MountSandboxMethod(p, plugin.Method{
		Type: plugin.Tool, Name: "get_user_preference", Description: "获取指定用户的特定偏好设置。",
		Doc: `获取用户的偏好设置值。

根据用户ID和偏好键名,从插件存储中检索对应的偏好设置值。
只能读取当前用户自己的偏好设置:user_id 必须是当前用户的 ID,
否则会抛出错误。

Only the current user's preferences can be read: user_id must be the
current user's ID, any other user_id raises an error.

Args:
    user_id (str): 用户的唯一标识符 (必须是当前用户)。
    preference_key (str): 需要查询的偏好设置的键名 (例如:"theme", "language")。

Returns:
    Optional[str]: 如果找到偏好设置,则返回其字符串值;如果未找到,则返回 None。

Example:
    theme = get_user_preference(user_id="user_123", preference_key="theme")
    if theme:
        print(f"用户的主题是: {theme}")
    else:
        print("未找到用户的主题偏好设置。")`,
	}, getUserPreference)

	p.OnInit(migrateData)
	p.OnChannelReset(onReset)
	plugin.Register(p)
}

type prefArgs struct {
	Key   string `json:"key" jsonschema:"preference name"`
	Value string `json:"value" jsonschema:"preference value"`
}

// savePreference stores what seed 000's save_preference stores: a value in
// each of the three scopes. Like the seed, it saves the document's sample
// preferences whatever key and value are; it also keeps value under key in
// the user's scope, where get_user_preference (seed 004) finds it.
func savePreference(ctx *plugin.Ctx, a prefArgs) (string, error) {
	st := ctx.Store()
	if _, err := st.Set(ctx, ctx.ChatScope(), "last_command", "/weather London"); err != nil {
		return "", err
	}
	if a.Key != "" {
		if _, err := st.Set(ctx, ctx.UserScope(), a.Key, a.Value); err != nil {
			return "", err
		}
	}
	if _, err := st.Set(ctx, ctx.UserScope(), "preferences", `{"theme": "dark", "notifications": true}`); err != nil {
		return "", err
	}
	now := strconv.FormatFloat(float64(time.Now().UnixNano())/1e9, 'f', 6, 64)
	if _, err := st.Set(ctx, plugin.Global(), "plugin_last_updated", now); err != nil {
		return "", err
	}
	return "偏好设置已保存", nil
}

type keyArgs struct {
	Key string `json:"key" jsonschema:"preference name"`
}

func getPreference(ctx *plugin.Ctx, _ keyArgs) (string, error) {
	st := ctx.Store()
	// Read as the seed does; only the preferences are answered.
	if _, _, err := st.Get(ctx, ctx.ChatScope(), "last_command"); err != nil {
		return "", err
	}
	prefs, found, err := st.Get(ctx, ctx.UserScope(), "preferences")
	if err != nil {
		return "", err
	}
	if !found || prefs == "" {
		prefs = `{"theme": "light", "notifications": false}`
	}
	if _, _, err := st.Get(ctx, plugin.Global(), "plugin_last_updated"); err != nil {
		return "", err
	}
	repr, err := pyRepr(prefs)
	if err != nil {
		return "", fmt.Errorf("stored preferences: %w", err)
	}
	return "偏好: " + repr, nil
}

func clearCache(ctx *plugin.Ctx, _ struct{}) (string, error) {
	st := ctx.Store()
	if _, err := st.Delete(ctx, ctx.ChatScope(), "session_cache_data"); err != nil {
		return "", err
	}
	if _, err := st.Delete(ctx, ctx.UserScope(), "old_setting"); err != nil {
		return "", err
	}
	return "缓存已清除", nil
}

// note and userNotes are the seeds' Note and UserNotes models, with the
// same JSON field names.
type note struct {
	ID        string   `json:"id"`
	Title     string   `json:"title"`
	Content   string   `json:"content"`
	CreatedAt float64  `json:"created_at"`
	Tags      []string `json:"tags"`
}

type userNotes struct {
	Notes map[string]note `json:"notes"`
}

type addNoteArgs struct {
	NoteID  string `json:"note_id" jsonschema:"the note's id"`
	Title   string `json:"title" jsonschema:"its title"`
	Content string `json:"content" jsonschema:"its text"`
	TagsStr string `json:"tags_str,omitempty" default:"\"\"" jsonschema:"comma-separated tags"`
}

func addNote(ctx *plugin.Ctx, a addNoteArgs) (string, error) {
	tags := []string{}
	if a.TagsStr != "" {
		tags = strings.Split(a.TagsStr, ",")
	}
	n := note{ID: a.NoteID, Title: a.Title, Content: a.Content,
		CreatedAt: float64(time.Now().UnixNano()) / 1e9, Tags: tags}
	_, err := ctx.Store().Update(ctx, ctx.UserScope(), "all_notes", func(cur string, found bool) (string, error) {
		notes := userNotes{Notes: map[string]note{}}
		if found && cur != "" {
			if err := json.Unmarshal([]byte(cur), &notes); err != nil {
				return "", fmt.Errorf("stored notes: %w", err)
			}
			if notes.Notes == nil {
				notes.Notes = map[string]note{}
			}
		}
		notes.Notes[a.NoteID] = n
		b, err := json.Marshal(notes)
		return string(b), err
	})
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("笔记 '%s' 已添加,ID: %s", a.Title, a.NoteID), nil
}

type noteIDArgs struct {
	NoteID string `json:"note_id" jsonschema:"the note's id"`
}

func getNote(ctx *plugin.Ctx, a noteIDArgs) (string, error) {
	raw, found, err := ctx.Store().Get(ctx, ctx.UserScope(), "all_notes")
	if err != nil {
		return "", err
	}
	if !found || raw == "" {
		return "用户没有任何笔记", nil
	}
	var notes userNotes
	if err := json.Unmarshal([]byte(raw), &notes); err != nil {
		return "", fmt.Errorf("stored notes: %w", err)
	}
	n, ok := notes.Notes[a.NoteID]
	if !ok {
		return fmt.Sprintf("未找到 ID 为 '%s' 的笔记", a.NoteID), nil
	}
	return fmt.Sprintf("标题: %s\n内容: %s\n标签: %s", n.Title, n.Content, strings.Join(n.Tags, ", ")), nil
}

type userPrefArgs struct {
	UserID        string `json:"user_id" jsonschema:"用户的唯一标识符。"`
	PreferenceKey string `json:"preference_key" jsonschema:"需要查询的偏好设置的键名"`
}

// errOtherUser refuses get_user_preference for a user other than the run's.
var errOtherUser = errors.New("get_user_preference can only read the current user's preferences")

// getUserPreference reads a preference of the run's user. Seed 004 reads
// the scope of whatever user_id it is given; user_id comes from the AI, so
// that would let any chat read any user's data. The argument is kept for
// the seed's signature and must name the run's own user.
func getUserPreference(ctx *plugin.Ctx, a userPrefArgs) (*string, error) {
	if a.UserID != ctx.UserID() {
		return nil, fmt.Errorf("user_id %q is not the current user: %w", a.UserID, errOtherUser)
	}
	v, found, err := ctx.Store().Get(ctx, ctx.UserScope(), a.PreferenceKey)
	if err != nil || !found {
		return nil, err
	}
	return &v, nil
}

// migrateData is the seeds' init hook: it brings the plugin's data to
// version 2.0.0 once, before the first run.
func migrateData(ctx context.Context) error {
	st := p.Store()
	version, found, err := st.Get(ctx, plugin.Global(), "data_version")
	if err != nil {
		return err
	}
	if found && version >= "2.0.0" {
		return nil
	}
	p.Logger().Info("检测到旧版本数据,开始迁移...", "from", version)
	// (The seeds leave the migration itself open.)
	if _, err := st.Set(ctx, plugin.Global(), "data_version", "2.0.0"); err != nil {
		return err
	}
	p.Logger().Info("数据迁移完成")
	return nil
}

// onReset is the seeds' channel-reset hook: a reset chat loses its
// temporary cache.
func onReset(ctx context.Context, chatKey string) error {
	_, err := p.Store().Delete(ctx, plugin.Chat(chatKey), "temp_cache")
	return err
}

// pyRepr renders a JSON object the way Python prints the dict json.loads
// makes of it: {'theme': 'dark', 'notifications': True}, keys in order.
func pyRepr(js string) (string, error) {
	dec := json.NewDecoder(strings.NewReader(js))
	dec.UseNumber()
	var b bytes.Buffer
	if err := reprValue(dec, &b); err != nil {
		return "", err
	}
	if dec.More() {
		return "", errors.New("trailing data after JSON value")
	}
	return b.String(), nil
}

func reprValue(dec *json.Decoder, b *bytes.Buffer) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch t := tok.(type) {
	case json.Delim:
		open, close := "{", "}"
		if t == '[' {
			open, close = "[", "]"
		}
		b.WriteString(open)
		for first := true; dec.More(); first = false {
			if !first {
				b.WriteString(", ")
			}
			if t == '{' {
				k, err := dec.Token()
				if err != nil {
					return err
				}
				b.WriteString(pyStr(k.(string)) + ": ")
			}
			if err := reprValue(dec, b); err != nil {
				return err
			}
		}
		if _, err := dec.Token(); err != nil { // the closing delimiter
			return err
		}
		b.WriteString(close)
	case string:
		b.WriteString(pyStr(t))
	case bool:
		b.WriteString(map[bool]string{true: "True", false: "False"}[t])
	case nil:
		b.WriteString("None")
	case json.Number:
		b.WriteString(t.String())
	}
	return nil
}

// pyStr quotes s as Python's repr does for ordinary text.
func pyStr(s string) string {
	q := "'"
	if strings.Contains(s, "'") && !strings.Contains(s, `"`) {
		q = `"`
	}
	r := strings.NewReplacer(`\`, `\\`, "\n", `\n`, "\r", `\r`, "\t", `\t`)
	s = r.Replace(s)
	if q == "'" {
		s = strings.ReplaceAll(s, "'", `\'`)
	}
	return q + s + q
}
