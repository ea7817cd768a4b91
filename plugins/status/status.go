// Package status is the built-in plugin nekro.status, a port of the
// reference's status plugin: it keeps the AI's character consistent in
// role-play. The AI's code records the character's current state
// (update_preset_status) whenever the scene changes it, and every turn of
// the chat shows that state, with the few before it, in the prompt. A reset
// of the chat clears it.
//
// Deviations from the reference, each on purpose:
//
//   - A chat key other than the run's own is refused with an error telling
//     the code to pass _ck. The reference acted on any chat key the code
//     named, so one chat's code could rewrite another's character.
//   - update_preset_status changes the state with Store.Update, atomically:
//     two runs updating at once both land in the history (the reference
//     read, changed and wrote back the list, losing one).
//   - Updating to the same setting name again refreshes its description
//     as well as its time (the reference kept the old description and
//     dropped the new one).
//   - Times past a day read "1d 02:03:04" (the reference's %H:%M:%S
//     wrapped at 24 hours).
//   - The reference also set the bot's QQ group card (nickname) to the
//     setting name, through OneBot v11, and back to the preset's name on
//     clear and reset (settings ENABLE_CHANGE_NICKNAME, NICKNAME_PREFIX).
//     The SDK reaches no adapter's bot profile, so that part is not ported
//     and neither are its two settings; the plugin works in every chat,
//     not only OneBot ones.
package status

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/nekro-go/nekro/plugin"
)

var p = plugin.New(plugin.Meta{
	Name:        "Character status",
	ModuleName:  "status",
	Author:      "nekro",
	Version:     "1.0.0",
	Description: "Keeps the AI's role-play character's current state, shown in every turn's prompt; a chat reset clears it.",
})

// Settings are the reference's StatusConfig fields this port uses, under
// the same names.
type Settings struct {
	MaxListSize  int `json:"MAX_PRESET_STATUS_LIST_SIZE" title:"Statuses kept" description:"how many past statuses of a chat are kept; older ones are dropped" min:"1"`
	MaxReferSize int `json:"MAX_PRESET_STATUS_REFER_SIZE" title:"Statuses shown" description:"how many of the latest statuses (the current one included) each turn's prompt shows" min:"1"`
}

var settings = plugin.MountConfig(p, Settings{MaxListSize: 99, MaxReferSize: 5})

// storeKey holds a chat's statuses, in the chat's scope.
const storeKey = "status"

// UpdateArgs are update_preset_status's parameters.
type UpdateArgs struct {
	ChatKey     string `json:"chat_key" jsonschema:"the chat's key; always pass _ck (other chats are refused)"`
	SettingName string `json:"setting_name" jsonschema:"New Character Preset Name (keep short, less than 20 characters, recommend using the character name)"`
	Description string `json:"description" jsonschema:"Description of the change state and reason (Recommend format: \"由于 [事件]，转变为 [新状态的详细描述] [且仍然...(旧状态仍有效信息 可选)]\" **event must be summarized based on the context and described as detailed as possible to describe the current state, appearance, action, etc.**)"`
}

// ClearArgs are clear_status's parameters.
type ClearArgs struct {
	ChatKey string `json:"chat_key" jsonschema:"the chat's key; always pass _ck (other chats are refused)"`
}

func init() {
	plugin.MountSandboxMethod(p, plugin.Method{
		Type: plugin.Tool, Name: "update_preset_status", Description: "更新角色状态",
		Doc: `Update Character Preset Basic Status

**Attention**:
1. You must call this method only when the scene development changes and the
   current preset status **does not match**. Only the latest statuses are
   kept and shown, because the context is limited: do not call this method
   too often, or the earlier status records will be lost!

Returns:
    str: the change made

Example:
    character_name = "" # Replace with actual character name (Your Name)
    # Assuming the new state is "认真看书" and the previous state is "戴着帽子"
    update_preset_status(_ck, f"正在认真看书的{character_name}", f'由于 ... " ... {character_name} 开始认真看书且仍然戴着帽子')`,
	}, updateStatus)

	plugin.MountSandboxMethod(p, plugin.Method{
		Type: plugin.Tool, Name: "clear_status", Description: "清除角色状态",
		Doc: `Clear Character Preset Status

Returns:
    str: Result message

Example:
    clear_status(_ck)`,
	}, clearStatus)

	p.OnPromptInject(injectStatus)
	p.OnChannelReset(func(ctx context.Context, chatKey string) error {
		if _, err := p.Store().Delete(ctx, plugin.Chat(chatKey), storeKey); err != nil {
			return fmt.Errorf("clear the status of chat %s: %w", chatKey, err)
		}
		return nil
	})
	plugin.Register(p)
}

// ownChat refuses a chat key other than the run's, as plugins/basic does.
func ownChat(ctx *plugin.Ctx, key string) error {
	if key != ctx.ChatKey() {
		return fmt.Errorf("chat_key %q is not this chat: the status is only read and written in the chat the code runs for, so pass _ck", key)
	}
	return nil
}

// preset is one status, with the reference's fields.
type preset struct {
	SettingName string `json:"setting_name"`
	Description string `json:"description"`
	Updated     int64  `json:"translated_timestamp"` // Unix seconds
}

// history is a chat's statuses, oldest first; the last is the current one.
type history struct {
	List []preset `json:"preset_status_list"`
}

func parseHistory(raw string, found bool) (history, error) {
	var h history
	if !found || raw == "" {
		return h, nil
	}
	if err := json.Unmarshal([]byte(raw), &h); err != nil {
		return h, fmt.Errorf("the chat's stored status is unreadable: %w", err)
	}
	return h, nil
}

func (h history) latest() (preset, bool) {
	if len(h.List) == 0 {
		return preset{}, false
	}
	return h.List[len(h.List)-1], true
}

func updateStatus(ctx *plugin.Ctx, a UpdateArgs) (string, error) {
	if err := ownChat(ctx, a.ChatKey); err != nil {
		return "", err
	}
	next := preset{
		SettingName: strings.TrimSpace(a.SettingName),
		Description: strings.ReplaceAll(strings.TrimSpace(a.Description), "\n", " "),
		Updated:     time.Now().Unix(),
	}
	if next.SettingName == "" {
		return "", fmt.Errorf("setting_name is empty: name the character's new status")
	}
	limit := settings.Get().MaxListSize
	var before preset
	var had bool
	_, err := ctx.Store().Update(ctx, ctx.ChatScope(), storeKey, func(cur string, found bool) (string, error) {
		h, err := parseHistory(cur, found)
		if err != nil {
			return "", err
		}
		before, had = h.latest()
		if had && before.SettingName == next.SettingName {
			h.List[len(h.List)-1] = next
		} else {
			h.List = append(h.List, next)
			if over := len(h.List) - max(limit, 1); over > 0 {
				h.List = h.List[over:]
			}
		}
		raw, err := json.Marshal(h)
		return string(raw), err
	})
	if err != nil {
		return "", fmt.Errorf("update the status: %w", err)
	}
	// before and had are read only after Update succeeded: fn has returned.
	if had && before.SettingName == next.SettingName {
		return fmt.Sprintf("Preset status `%s` refreshed: same setting name, its description and time updated", next.SettingName), nil
	}
	if had {
		return fmt.Sprintf("Preset status updated from `%s` to `%s` (Use `set_note` or `remove_note` method to maintain the scene consistency)",
			before.SettingName, next.SettingName), nil
	}
	return fmt.Sprintf("Preset status updated to `%s`", next.SettingName), nil
}

func clearStatus(ctx *plugin.Ctx, a ClearArgs) (string, error) {
	if err := ownChat(ctx, a.ChatKey); err != nil {
		return "", err
	}
	r, err := ctx.Store().Delete(ctx, ctx.ChatScope(), storeKey)
	if err != nil {
		return "", fmt.Errorf("clear the status: %w", err)
	}
	if r == plugin.NotFound {
		return "No status to clear", nil
	}
	return "Character status cleared", nil
}

// injectStatus puts the chat's status into the turn's prompt.
func injectStatus(ctx *plugin.Ctx) (string, error) {
	raw, found, err := ctx.Store().Get(ctx, ctx.ChatScope(), storeKey)
	if err != nil {
		return "", err
	}
	h, err := parseHistory(raw, found)
	if err != nil {
		return "", err
	}
	return render(h, settings.Get(), time.Now()), nil
}

// render is the reference's prompt: up to MaxReferSize-1 earlier statuses,
// then the current one with a nudge to update it once it is 5 minutes old.
func render(h history, s Settings, now time.Time) string {
	cur, ok := h.latest()
	if !ok {
		return "Current Character Setting status: No special status. (Use `update_preset_status` to update it **immediately**!)"
	}
	var b strings.Builder
	if earlier := h.List[:len(h.List)-1]; len(earlier) > 0 {
		earlier = earlier[max(0, len(earlier)-(max(s.MaxReferSize, 1)-1)):]
		if len(earlier) > 0 {
			b.WriteString("History Status:\n")
			for _, e := range earlier {
				b.WriteString(" " + line(e, now) + "\n")
			}
		}
	}
	age := now.Sub(time.Unix(cur.Updated, 0))
	nudge := " Use `update_preset_status` to update it If doesn't fit the current scene description."
	if age > 5*time.Minute {
		nudge = " Please Use `update_preset_status` to update it."
	}
	b.WriteString("Current Character Setting status: " + strings.TrimSuffix(line(cur, now), ")") + nudge + ")")
	return b.String()
}

func line(e preset, now time.Time) string {
	return fmt.Sprintf("%s: %s (updated %s ago.)", plugin.EscapePrompt(e.SettingName), plugin.EscapePrompt(e.Description),
		clock(now.Sub(time.Unix(e.Updated, 0))))
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
