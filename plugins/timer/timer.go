// Package timer is the built-in plugin nekro.timer, a port of the
// reference's timer plugin: the AI wakes itself later. set_timer sets a
// one-shot timer (0 fires now, a negative time clears, a temporary timer
// is the chat's only one of its kind, for "come back and look in a
// minute"); create_recurring_timer and its kin keep cron jobs (5 fields,
// an IANA time zone, optional weekday filter). A firing timer adds a
// system message naming its description to the chat, and a turn answers
// it. Every turn's prompt lists the chat's active timers.
//
// Timers are kept by the host's timer service (Plugin.SetTimer), in
// the database: they outlive restarts, a timer due while nekro was down
// fires once when it starts and says how late it is, and of several nekro
// processes sharing the database one fires each occurrence.
//
// Deviations from the reference, each on purpose:
//
//   - Everything is the run's own chat: a chat_key other than _ck is
//     refused, and the job-id methods (update, pause, resume, delete) find
//     only the chat's own jobs. The reference acted on any chat named and
//     on any job id (about 4 characters, guessable) of any chat.
//   - Job ids are random 128-bit hex.
//   - workday_mode cn_workday and cn_restday (China's statutory calendar)
//     are refused: nekro carries no holiday calendar. none, mon_fri and
//     weekend work as in the reference.
//   - The prompt lists no "recent runs" of recurring jobs (the reference
//     tracked last runs and failures per job; nekro keeps only the next
//     occurrence). A job whose firing failed is not auto-paused.
//   - A missed occurrence fires once, saying how late, however many were
//     missed, for one-shot and recurring timers alike.
package timer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/nekro-go/nekro/plugin"
)

var p = plugin.New(plugin.Meta{
	Name:        "Timers",
	ModuleName:  "timer",
	Author:      "nekro",
	Version:     "1.0.0",
	Description: "One-shot timers and recurring cron jobs that wake the AI in its chat; each turn's prompt lists the chat's timers.",
})

// Settings are the reference's TimerConfig, under the same names.
type Settings struct {
	MaxDescLength   int    `json:"MAX_DISPLAY_DESC_LENGTH" title:"Longest description shown" description:"a longer timer description shows its start and end in the prompt" min:"8"`
	UpcomingLimit   int    `json:"RECURRING_INJECT_UPCOMING_LIMIT" title:"Recurring jobs shown" description:"how many of the chat's next recurring jobs the prompt lists" min:"0"`
	MaxRecurring    int    `json:"MAX_RECURRING_PER_CHAT" title:"Recurring jobs per chat" description:"most recurring jobs one chat may keep" min:"1" max:"90"`
	DefaultTimezone string `json:"DEFAULT_TIMEZONE" title:"Default time zone" description:"IANA time zone of a recurring job created without one, e.g. Asia/Shanghai"`
}

var settings = plugin.MountConfig(p, Settings{
	MaxDescLength: 100, UpcomingLimit: 3, MaxRecurring: 50, DefaultTimezone: localZone(),
})

// localZone is the host's IANA zone when TZ names one, else UTC.
func localZone() string {
	if tz := os.Getenv("TZ"); tz != "" {
		if _, err := time.LoadLocation(tz); err == nil {
			return tz
		}
	}
	return "UTC"
}

// temporaryID is the id of a chat's temporary timer: setting another
// replaces it.
const temporaryID = "temporary"

// job is what a timer's payload holds.
type job struct {
	Desc      string `json:"desc"`
	Title     string `json:"title,omitempty"`
	Temporary bool   `json:"temporary,omitempty"`
	Workday   string `json:"workday,omitempty"`
	Paused    bool   `json:"paused,omitempty"`
}

type entry struct {
	id, cron, tz string
	due          time.Time
	job          job
}

func chatTimers(ctx context.Context, chat string) ([]entry, error) {
	var out []entry
	err := p.Timers(ctx, chat, func(id string, due time.Time, cron, tz, payload string) {
		e := entry{id: id, cron: cron, tz: tz, due: due}
		json.Unmarshal([]byte(payload), &e.job)
		out = append(out, e)
	})
	return out, err
}

func encode(j job) string {
	b, _ := json.Marshal(j)
	return string(b)
}

// ownChat refuses a chat key other than the run's, as plugins/basic does.
func ownChat(ctx *plugin.Ctx, key string) error {
	if key != ctx.ChatKey() {
		return fmt.Errorf("chat_key %q is not this chat: timers belong to the run's own chat, so pass _ck", key)
	}
	return nil
}

// SetArgs are set_timer's parameters.
type SetArgs struct {
	ChatKey     string `json:"chat_key" jsonschema:"频道标识: the chat's key; always pass _ck (other chats are refused)"`
	TriggerTime int64  `json:"trigger_time" jsonschema:"触发时间戳 (unix seconds). 0 triggers the chat now; < 0 clears this chat's timers of the kind temporary names"`
	EventDesc   string `json:"event_desc" jsonschema:"事件描述: detailed context of the event, shown when it fires"`
	Temporary   bool   `json:"temporary" jsonschema:"临时定时器: a short self-wake-up; the chat keeps only its last temporary timer. With trigger_time < 0, which kind to clear"`
}

func setTimer(ctx *plugin.Ctx, a SetArgs) (bool, error) {
	if err := ownChat(ctx, a.ChatKey); err != nil {
		return false, err
	}
	chat := ctx.ChatKey()
	switch {
	case a.TriggerTime < 0:
		list, err := chatTimers(ctx, chat)
		if err != nil {
			return false, err
		}
		for _, e := range list {
			if e.cron == "" && e.job.Temporary == a.Temporary {
				if _, err := p.ClearTimer(ctx, chat, e.id); err != nil {
					return false, err
				}
			}
		}
		return true, nil
	case a.TriggerTime == 0:
		return true, ctx.PushSystem(message(job{Desc: a.EventDesc}, 0), true)
	}
	at := time.Unix(a.TriggerTime, 0)
	if !at.After(time.Now()) {
		return false, nil // as the reference: a time past is not set
	}
	if at.After(time.Now().AddDate(10, 0, 0)) {
		return false, errors.New("trigger_time is more than ten years away: pass unix seconds")
	}
	id := ""
	if a.Temporary {
		id = temporaryID
	}
	if _, err := p.SetTimer(ctx, chat, id, at, "", "", encode(job{Desc: a.EventDesc, Temporary: a.Temporary})); err != nil {
		return false, err
	}
	return true, nil
}

// message is the system message of a firing.
func message(j job, late time.Duration) string {
	var b strings.Builder
	b.WriteString("⏰ 定时提醒")
	if late >= 5*time.Second {
		fmt.Fprintf(&b, " (late by %s: nekro was not running when it was due)", late.Round(time.Second))
	}
	b.WriteString("：")
	if j.Title != "" {
		b.WriteString(j.Title + "\n")
	}
	b.WriteString(j.Desc)
	return b.String()
}

func fire(ctx context.Context, chat, id, payload string, late time.Duration) error {
	var j job
	if err := json.Unmarshal([]byte(payload), &j); err != nil {
		j = job{Desc: payload}
	}
	if j.Paused {
		return nil
	}
	if j.Workday == "mon_fri" || j.Workday == "weekend" {
		// The occurrence's day, in the job's zone: the timer's own,
		// read back.
		list, _ := chatTimers(ctx, chat)
		day := time.Now().Add(-late)
		for _, e := range list {
			if e.id == id {
				if loc, err := time.LoadLocation(e.tz); err == nil {
					day = day.In(loc)
				}
			}
		}
		weekend := day.Weekday() == time.Saturday || day.Weekday() == time.Sunday
		if weekend != (j.Workday == "weekend") {
			return nil
		}
	}
	return p.PushSystem(ctx, chat, message(j, late), true)
}

var workdayModes = map[string]bool{"none": true, "mon_fri": true, "weekend": true}

func checkWorkday(m string) (string, error) {
	m = strings.TrimSpace(m)
	if m == "" {
		return "none", nil
	}
	if m == "cn_workday" || m == "cn_restday" {
		return "", fmt.Errorf("workday_mode %s needs China's holiday calendar, which nekro does not carry: use none, mon_fri or weekend", m)
	}
	if !workdayModes[m] {
		return "", fmt.Errorf("workday_mode 非法: %s (use none, mon_fri or weekend)", m)
	}
	return m, nil
}

// CreateArgs are create_recurring_timer's parameters.
type CreateArgs struct {
	ChatKey     string `json:"chat_key" jsonschema:"频道标识: the chat's key; always pass _ck"`
	CronExpr    string `json:"cron_expr" jsonschema:"cron 表达式（5 段）: min hour day month dow"`
	EventDesc   string `json:"event_desc" jsonschema:"事件描述: context given to you when it fires"`
	WorkdayMode string `json:"workday_mode,omitempty" default:"\"none\"" jsonschema:"触发日模式: none (as the cron says), mon_fri (Monday to Friday only) or weekend (Saturday and Sunday only)"`
	Timezone    string `json:"timezone,omitempty" default:"\"\"" jsonschema:"时区 (IANA, e.g. Asia/Shanghai); empty is the plugin's default"`
	Title       string `json:"title,omitempty" default:"\"\"" jsonschema:"标题 (optional), shown in the prompt's summary"`
}

func createRecurring(ctx *plugin.Ctx, a CreateArgs) (string, error) {
	if err := ownChat(ctx, a.ChatKey); err != nil {
		return "", err
	}
	mode, err := checkWorkday(a.WorkdayMode)
	if err != nil {
		return "", err
	}
	tz := strings.TrimSpace(a.Timezone)
	if tz == "" {
		tz = settings.Get().DefaultTimezone
	}
	list, err := chatTimers(ctx, ctx.ChatKey())
	if err != nil {
		return "", err
	}
	n := 0
	for _, e := range list {
		if e.cron != "" {
			n++
		}
	}
	if n >= settings.Get().MaxRecurring {
		return "", errors.New("周期任务数量过多，请先清理无用任务再创建 (too many recurring jobs in this chat: delete some first)")
	}
	return p.SetTimer(ctx, ctx.ChatKey(), "", time.Time{}, strings.TrimSpace(a.CronExpr), tz,
		encode(job{Desc: a.EventDesc, Title: strings.TrimSpace(a.Title), Workday: mode}))
}

// ListArgs are list_recurring_timers' parameters.
type ListArgs struct {
	ChatKey string `json:"chat_key" jsonschema:"频道标识: the chat's key; always pass _ck"`
	Status  string `json:"status,omitempty" default:"\"\"" jsonschema:"active or paused; empty lists both"`
	Limit   int    `json:"limit,omitempty" default:"50" jsonschema:"most jobs to return"`
}

func listRecurring(ctx *plugin.Ctx, a ListArgs) (map[string]any, error) {
	if err := ownChat(ctx, a.ChatKey); err != nil {
		return nil, err
	}
	list, err := chatTimers(ctx, ctx.ChatKey())
	if err != nil {
		return nil, err
	}
	limit := a.Limit
	if limit <= 0 {
		limit = 50
	}
	jobs := []map[string]any{}
	for _, e := range list {
		if e.cron == "" || len(jobs) >= limit {
			continue
		}
		status := "active"
		if e.job.Paused {
			status = "paused"
		}
		if s := strings.TrimSpace(a.Status); s != "" && s != status {
			continue
		}
		jobs = append(jobs, map[string]any{"id": e.id, "title": e.job.Title, "status": status, "cron_expr": e.cron,
			"timezone": e.tz, "workday_mode": e.job.Workday, "event_desc": e.job.Desc, "next_run_at": formatIn(e.due, e.tz)})
	}
	return map[string]any{"count": len(jobs), "jobs": jobs}, nil
}

// findJob returns the chat's recurring job id.
func findJob(ctx *plugin.Ctx, id string) (entry, error) {
	list, err := chatTimers(ctx, ctx.ChatKey())
	if err != nil {
		return entry{}, err
	}
	for _, e := range list {
		if e.id == strings.TrimSpace(id) && e.cron != "" {
			return e, nil
		}
	}
	return entry{}, fmt.Errorf("no recurring job %q in this chat (see list_recurring_timers)", id)
}

// UpdateArgs are update_recurring_timer's parameters.
type UpdateArgs struct {
	JobID       string `json:"job_id" jsonschema:"任务ID: the job's id in this chat"`
	CronExpr    string `json:"cron_expr,omitempty" default:"\"\"" jsonschema:"empty keeps it"`
	EventDesc   string `json:"event_desc,omitempty" default:"\"\"" jsonschema:"empty keeps it"`
	WorkdayMode string `json:"workday_mode,omitempty" default:"\"\"" jsonschema:"empty keeps it (none/mon_fri/weekend)"`
	Timezone    string `json:"timezone,omitempty" default:"\"\"" jsonschema:"empty keeps it"`
	Title       string `json:"title,omitempty" default:"\"\"" jsonschema:"empty keeps it; a single space \" \" clears it"`
}

func updateRecurring(ctx *plugin.Ctx, a UpdateArgs) (bool, error) {
	e, err := findJob(ctx, a.JobID)
	if err != nil {
		return false, err
	}
	due := e.due
	if c := strings.TrimSpace(a.CronExpr); c != "" && c != e.cron {
		e.cron, due = c, time.Time{}
	}
	if tz := strings.TrimSpace(a.Timezone); tz != "" && tz != e.tz {
		e.tz, due = tz, time.Time{}
	}
	if a.EventDesc != "" {
		e.job.Desc = a.EventDesc
	}
	if strings.TrimSpace(a.WorkdayMode) != "" {
		if e.job.Workday, err = checkWorkday(a.WorkdayMode); err != nil {
			return false, err
		}
	}
	if a.Title != "" {
		e.job.Title = strings.TrimSpace(a.Title)
	}
	_, err = p.SetTimer(ctx, ctx.ChatKey(), e.id, due, e.cron, e.tz, encode(e.job))
	return err == nil, err
}

// JobArgs name one recurring job.
type JobArgs struct {
	JobID string `json:"job_id" jsonschema:"任务ID: the job's id in this chat"`
}

func setPaused(ctx *plugin.Ctx, a JobArgs, paused bool) (string, error) {
	e, err := findJob(ctx, a.JobID)
	if err != nil {
		return "", err
	}
	e.job.Paused = paused
	due := e.due
	if !paused {
		due = time.Time{} // the next occurrence from now
	}
	if _, err := p.SetTimer(ctx, ctx.ChatKey(), e.id, due, e.cron, e.tz, encode(e.job)); err != nil {
		return "", err
	}
	if paused {
		return fmt.Sprintf("周期定时任务 %s 已暂停", e.id), nil
	}
	return fmt.Sprintf("周期定时任务 %s 已恢复", e.id), nil
}

func deleteRecurring(ctx *plugin.Ctx, a JobArgs) (string, error) {
	e, err := findJob(ctx, a.JobID)
	if err != nil {
		return "", err
	}
	if _, err := p.ClearTimer(ctx, ctx.ChatKey(), e.id); err != nil {
		return "", err
	}
	return fmt.Sprintf("周期定时任务 %s 已删除", e.id), nil
}

func formatIn(t time.Time, tz string) string {
	if loc, err := time.LoadLocation(tz); err == nil && tz != "" {
		t = t.In(loc)
	}
	return t.Format("2006-01-02 15:04:05")
}

func shorten(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n/2]) + "..." + string(r[len(r)-n/2:])
}

func remaining(d time.Duration) string {
	s := int64(d.Round(time.Second) / time.Second)
	h, m, sec := s/3600, s%3600/60, s%60
	switch {
	case h > 0:
		return fmt.Sprintf("%dh %dm %ds", h, m, sec)
	case m > 0:
		return fmt.Sprintf("%dm %ds", m, sec)
	}
	return fmt.Sprintf("%ds", sec)
}

func inject(ctx *plugin.Ctx) (string, error) {
	list, err := chatTimers(ctx, ctx.ChatKey())
	if err != nil {
		return "", err
	}
	cfg := settings.Get()
	now := time.Now()
	var timers, upcoming []string
	active, paused := 0, 0
	for _, e := range list {
		if e.cron == "" {
			if !e.due.After(now) {
				continue
			}
			kind := "Regular"
			if e.job.Temporary {
				kind = "Temporary"
			}
			timers = append(timers, fmt.Sprintf("Timer #%d: %s\n- Type: %s\n- Trigger: %s\n- Remaining: %s",
				len(timers)+1, plugin.EscapePrompt(shorten(e.job.Desc, cfg.MaxDescLength)), kind, e.due.Format("2006-01-02 15:04:05"), remaining(e.due.Sub(now))))
			continue
		}
		if e.job.Paused {
			paused++
			continue
		}
		active++
		if len(upcoming) < cfg.UpcomingLimit {
			desc := e.job.Title
			if desc == "" {
				desc = e.job.Desc
			}
			upcoming = append(upcoming, fmt.Sprintf("Recurring #%d: %s\n- ID: %s\n- Cron: %s\n- Next: %s\n- TZ: %s\n- WorkdayMode: %s",
				len(upcoming)+1, plugin.EscapePrompt(shorten(desc, cfg.MaxDescLength)), plugin.EscapePrompt(e.id), e.cron, formatIn(e.due, e.tz), e.tz, e.job.Workday))
		}
	}
	var parts []string
	if len(timers) > 0 {
		parts = append(parts, "Active Timers:\n\n"+strings.Join(timers, "\n\n"))
	}
	if active+paused > 0 {
		parts = append(parts, fmt.Sprintf("Recurring Jobs: active=%d, paused=%d", active, paused))
	}
	if len(upcoming) > 0 {
		parts = append(parts, "Upcoming Recurring:\n\n"+strings.Join(upcoming, "\n\n"))
	}
	if len(parts) == 0 {
		return "No active timers", nil
	}
	parts = append(parts, "Tip: 管理周期任务时，请使用上面展示的任务ID（ID 字段）；需要全量列表可调用 `list_recurring_timers`。")
	return strings.Join(parts, "\n\n"), nil
}
