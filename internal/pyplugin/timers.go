package pyplugin

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/nekro-go/nekro/plugin"
)

// A Python plugin's recurring timers (nekro_agent.api.recurring_timer)
// are timers of nekro's timer system (plugin.SetTimer): kept in the
// database, outliving the plugin's process and nekro's restarts, fired by
// `nekro serve` under --timer-turns-per-hour like every plugin's. The
// payload is the job as the process describes it (pyJob); a firing
// pushes the job's text to its chat and wakes the agent, as the
// reference's recurring timers do.

// pyJob is a recurring job's payload, written by the process.
type pyJob struct {
	Desc    string `json:"desc"`
	Title   string `json:"title"`
	Workday string `json:"workday"` // none, mon_fri or weekend
	Paused  bool   `json:"paused"`
}

// timerArgs are the arguments of the process's timer requests.
type timerArgs struct {
	ChatKey string  `json:"chat_key"`
	ID      string  `json:"id"`
	At      float64 `json:"at"` // Unix seconds; 0: the cron's next occurrence
	Cron    string  `json:"cron"`
	TZ      string  `json:"tz"`
	Payload string  `json:"payload"`
}

// timerRow is one of a chat's timers as the process reads it.
type timerRow struct {
	ID      string `json:"id"`
	Due     int64  `json:"due"` // Unix seconds
	Cron    string `json:"cron"`
	TZ      string `json:"tz"`
	Payload string `json:"payload"`
}

// serveTimer answers the process's timer requests. Inside a call only
// the call's own chat; from a hook or a background task any chat, as
// Plugin.PushSystem.
func (h *host) serveTimer(ctx *plugin.Ctx, op string, raw json.RawMessage) (any, error) {
	var a timerArgs
	if err := json.Unmarshal(raw, &a); err != nil {
		return nil, fmt.Errorf("%s: bad arguments: %w", op, err)
	}
	if a.ChatKey == "" {
		return nil, fmt.Errorf("%s: no chat key", op)
	}
	if ctx != nil && a.ChatKey != ctx.ChatKey() {
		return nil, fmt.Errorf("a plugin's call can keep timers only in the chat of its run (%s), not in %s", ctx.ChatKey(), a.ChatKey)
	}
	c := serviceContext(ctx)
	switch op {
	case "timer.set":
		var at time.Time
		if a.At > 0 {
			at = time.Unix(0, int64(a.At*1e9))
		}
		return h.plugin.SetTimer(c, a.ChatKey, a.ID, at, strings.TrimSpace(a.Cron), a.TZ, a.Payload)
	case "timer.clear":
		return h.plugin.ClearTimer(c, a.ChatKey, a.ID)
	default: // timer.list
		rows := []timerRow{}
		err := h.plugin.Timers(c, a.ChatKey, func(id string, due time.Time, cron, tz, payload string) {
			rows = append(rows, timerRow{ID: id, Due: due.Unix(), Cron: cron, TZ: tz, Payload: payload})
		})
		return rows, err
	}
}

// fireTimer is a Python plugin's OnTimer handler: a recurring job's
// firing pushes its text to the chat and wakes the agent, unless the job
// is paused or its day is not one of its workday mode's.
func (h *host) fireTimer(ctx context.Context, chat, id, payload string, late time.Duration) error {
	var j pyJob
	if err := json.Unmarshal([]byte(payload), &j); err != nil {
		j = pyJob{Desc: payload}
	}
	if j.Paused {
		return nil
	}
	if j.Workday == "mon_fri" || j.Workday == "weekend" {
		day := time.Now().Add(-late)
		h.plugin.Timers(ctx, chat, func(tid string, _ time.Time, _, tz, _ string) {
			if loc, err := time.LoadLocation(tz); tid == id && err == nil {
				day = day.In(loc)
			}
		})
		weekend := day.Weekday() == time.Saturday || day.Weekday() == time.Sunday
		if weekend != (j.Workday == "weekend") {
			return nil
		}
	}
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
	return h.plugin.PushSystem(ctx, chat, b.String(), true)
}
