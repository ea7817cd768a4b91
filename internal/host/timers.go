package host

import (
	"context"
	"fmt"
	"time"

	"github.com/nekro-go/nekro/internal/pluginhost"
	"github.com/nekro-go/nekro/internal/schedule"
	"github.com/nekro-go/nekro/plugin"
)

// timerPoll is how often a host that fires timers looks for due ones.
const timerPoll = time.Second

// TimerLateNote is the lateness past which a firing says how late it is
// (nekro was not running when the timer was due, or was overloaded).
const TimerLateNote = 5 * time.Second

func (s hostServices) SetTimer(ctx context.Context, chatKey, id string, at time.Time, cron, tz, payload string) (string, error) {
	return s.h.timers.Set(ctx, schedule.Timer{Plugin: s.p.Key(), Chat: chatKey, ID: id, Due: at, Cron: cron, TZ: tz, Payload: payload})
}

func (s hostServices) ClearTimer(ctx context.Context, chatKey, id string) (bool, error) {
	return s.h.timers.Clear(ctx, s.p.Key(), chatKey, id)
}

func (s hostServices) Timers(ctx context.Context, chatKey string, each func(id string, due time.Time, cron, tz, payload string)) error {
	list, err := s.h.timers.List(ctx, s.p.Key(), chatKey)
	if err != nil {
		return err
	}
	for _, t := range list {
		each(t.ID, t.Due, t.Cron, t.TZ, t.Payload)
	}
	return nil
}

var _ pluginhost.TimerServices = hostServices{}

// fireTimers fires the enabled plugins' due timers until ctx ends. Every
// process sharing the database may run it: Claim gives each occurrence
// to one of them.
func (h *Host) fireTimers(ctx context.Context) {
	defer h.bg.Done()
	t := time.NewTicker(timerPoll)
	defer t.Stop()
	for {
		h.pushMu.Lock()
		ready := h.push != nil // firings wake the agent: wait for it
		h.pushMu.Unlock()
		if !ready {
			select {
			case <-ctx.Done():
				return
			case <-time.After(50 * time.Millisecond):
				continue
			}
		}
		byKey := map[string]*plugin.Plugin{}
		var keys []string
		for _, p := range h.registry.Plugins() {
			byKey[p.Key()] = p
			keys = append(keys, p.Key())
		}
		fired, err := h.timers.Claim(ctx, time.Now(), keys, 100)
		if err != nil && ctx.Err() == nil {
			h.log.Warn("cannot read due timers", "err", err)
		}
		for _, f := range fired {
			p := byKey[f.Plugin]
			h.bg.Go(func() { h.fire(context.WithoutCancel(ctx), p, f) })
		}
		if len(fired) == 100 {
			continue // more are due
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// fire runs p's OnTimer handler for f, or pushes f's payload to its chat.
func (h *Host) fire(ctx context.Context, p *plugin.Plugin, f schedule.Fired) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	log := h.log.With("plugin", f.Plugin, "chat", f.Chat, "timer", f.ID, "late", f.Late.Round(time.Millisecond))
	log.Debug("timer fires") // per timer: at info a reminder-heavy chat would fill the log
	ctx = context.WithValue(ctx, timerFiring{}, true)
	defer func() {
		if r := recover(); r != nil {
			log.Error("timer handler panicked", "panic", r)
		}
	}()
	var err error
	if handle := pluginhost.TimerHandler(p); handle != nil {
		err = handle(ctx, f.Chat, f.ID, f.Payload, f.Late)
	} else {
		text := "⏰ Timer: " + f.Payload
		if f.Late >= TimerLateNote {
			text += fmt.Sprintf(" (fired %s late: nekro was not running when it was due)", f.Late.Round(time.Second))
		}
		err = hostServices{h: h, p: p}.PushSystem(ctx, f.Chat, text, true)
	}
	if err != nil {
		log.Error("timer handler failed", "err", err)
	}
}

// timerFiring marks the context of a timer's firing: a system message
// pushed with it that would wake a turn counts against the chat's
// budget (AllowTimerTurn).
type timerFiring struct{}

// TimerTurnsFlag is the setting that bounds the turns timers wake.
const TimerTurnsFlag = "--timer-turns-per-hour"

// AllowTimerTurn reports whether a system message pushed with ctx may
// wake a turn in chatKey. Any push may, except a timer's firing once the
// chat's timers have woken Config.TimerTurnsPerHour turns in the past
// hour: then the message is kept without a turn, and note says why (to
// be added to it, where the chat's operator sees it). The count lives
// in the database, so it holds across restarts and replicas.
func (h *Host) AllowTimerTurn(ctx context.Context, chatKey string) (ok bool, note string) {
	budget := h.cfg.TimerTurnsPerHour
	if budget <= 0 || h.timers == nil || ctx.Value(timerFiring{}) == nil {
		return true, ""
	}
	ok, err := h.timers.TakeTurn(ctx, chatKey, time.Now(), budget)
	if err != nil {
		// The budget is a bound on cost, not a protection of data: a
		// database that cannot count does not silence the chat's timers.
		h.log.Warn("cannot count the chat's timer turns; this one goes ahead", "chat", chatKey, "err", err)
		return true, ""
	}
	if ok {
		return true, ""
	}
	// One warning per chat and hour: a chat with 50 jobs a minute must
	// not fill the log either.
	now := time.Now()
	if last, seen := h.timerWarned.Load(chatKey); !seen || now.Sub(last.(time.Time)) >= time.Hour {
		h.timerWarned.Store(chatKey, now)
		h.log.Warn("a chat's timers used up their turns for this hour: their messages are kept without waking the model",
			"chat", chatKey, "budget", budget, "flag", TimerTurnsFlag)
	}
	return false, fmt.Sprintf("[no turn: this chat's timers already woke the model %d times in the past hour, the limit set by %s]", budget, TimerTurnsFlag)
}
