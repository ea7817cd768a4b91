package plugin

import (
	"context"
	"fmt"
	"time"
)

// timerHost is the part of the host's services that keeps timers
// (pluginhost.TimerServices); a runtime without it has no timers.
type timerHost interface {
	SetTimer(ctx context.Context, chatKey, id string, at time.Time, cron, tz, payload string) (string, error)
	ClearTimer(ctx context.Context, chatKey, id string) (bool, error)
	Timers(ctx context.Context, chatKey string, each func(id string, due time.Time, cron, tz, payload string)) error
}

func (p *Plugin) timers() (timerHost, error) {
	h, ok := p.services().(timerHost)
	if !ok {
		return nil, fmt.Errorf("timers: %w", ErrNoService)
	}
	return h, nil
}

// SetTimer sets a timer of the plugin in the chat chatKey and returns its
// id: a new random one when id is empty, or id, replacing the chat's
// timer of that id. It fires at at, once; or, with cron (5 fields:
// minute hour day month weekday) read in the IANA time zone tz, at every
// occurrence, the first being at when set and the next one otherwise.
// Timers are kept in the database: they outlive restarts, and of several
// nekro processes sharing it one fires each occurrence. A firing calls the
// OnTimer handler, or without one pushes payload to the chat as a system
// message that wakes the agent. chatKey must be the chat the timer is
// for: inside a sandbox method, ctx.ChatKey(), never a key the AI chose.
func (p *Plugin) SetTimer(ctx context.Context, chatKey, id string, at time.Time, cron, tz, payload string) (string, error) {
	h, err := p.timers()
	if err != nil {
		return "", err
	}
	return h.SetTimer(ctx, chatKey, id, at, cron, tz, payload)
}

// ClearTimer removes the plugin's timer id of the chat chatKey and says
// whether there was one.
func (p *Plugin) ClearTimer(ctx context.Context, chatKey, id string) (bool, error) {
	h, err := p.timers()
	if err != nil {
		return false, err
	}
	return h.ClearTimer(ctx, chatKey, id)
}

// Timers calls each with every timer the plugin keeps for the chat
// chatKey, soonest first: its id, next due time, cron expression and
// time zone ("" for a one-shot timer) and payload.
func (p *Plugin) Timers(ctx context.Context, chatKey string, each func(id string, due time.Time, cron, tz, payload string)) error {
	h, err := p.timers()
	if err != nil {
		return err
	}
	return h.Timers(ctx, chatKey, each)
}

// OnTimer sets what runs when one of the plugin's timers fires, in
// `nekro serve`: chatKey, id and payload are the timer's, and late is how
// long after its due time it fires (long when nekro was not running
// then: each timer fires once, however many occurrences it missed). Use
// p.PushSystem to wake the chat's agent. Without a handler a firing
// pushes the payload as a system message with trigger.
func (p *Plugin) OnTimer(f func(ctx context.Context, chatKey, id, payload string, late time.Duration) error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.onTimer = f
}
