// Package dice is the built-in dice plugin (nekro.dice), a port of the
// reference's 掷骰姬: randomness the AI asks the host for instead of
// inventing it.
//
//   - dice_roll(event_name, description, difficulty) (AGENT) rolls a d20
//     against a difficulty class from 1 to 20, with the reference's
//     "lucky bonus" of +1..+3 on about half of the rolls at difficulty 19
//     or 20 (models tend to set difficulties too high);
//   - probability_wheel(event_name, description, event_choices,
//     fallback_choice, total_probability) (AGENT) draws one outcome from
//     weighted choices, the fallback taking what the choices leave of the
//     total.
//
// Both post the result to the chat, where the users see it, and return it
// to the model, which answers in a new round.
//
// Super users can rig the d20 with chat commands, as in the reference:
// /dice_assert N decides the next roll, /dice_lock N every roll until
// /dice_unlock. An asserted roll wins over a lock.
//
// Deviations from the reference: the rig is kept per chat in the plugin's
// KV store (a rig typed in one chat leaves the others' dice alone, it
// holds across processes and restarts, and a chat reset clears it), where
// the reference kept one process-wide rig in memory; and a next-roll
// assertion is consumed atomically, so two concurrent rolls cannot both
// use it.
package dice

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"

	"github.com/nekro-go/nekro/plugin"
)

var p = plugin.New(plugin.Meta{
	Name:        "Dice",
	ModuleName:  "dice",
	Author:      "nekro",
	Version:     "1.0.0",
	Description: "A d20 check and a weighted probability wheel, for role play and random events.",
})

func init() {
	plugin.MountSandboxMethod(p, plugin.Method{
		Type: plugin.Agent, Name: "dice_roll", Description: "掷骰检定请求",
		Doc: `Roll a 20-sided die to decide whether an uncertain event succeeds (use lang: zh-CN).

Use it actively: fights, spells, defence, resistance, escapes, random
events, risky actions and interactions. The result is posted in the chat;
it only decides the outcome, you still have to act it out.

Returns:
    str: the roll, the difficulty and 成功 / 失败 / 大成功！ / 大失败！.

Example:
    dice_roll("撬锁", "尝试用发卡撬开生锈的铁锁", 12)`,
	}, roll)

	plugin.MountSandboxMethod(p, plugin.Method{
		Type: plugin.Agent, Name: "probability_wheel", Description: "概率轮盘选择",
		Doc: `Draw one outcome of a random event with several possible results, each with its own weight.

Use it for branching random events, random rewards and encounters. The
fallback outcome gets whatever the choices leave of total_probability.
The draw is posted in the chat.

Returns:
    str: the outcome drawn and its probability.

Example:
    probability_wheel(
        "探索神秘宝箱",
        "打开一个散发着奇异光芒的古老宝箱",
        {"获得稀有魔法武器": 5.0, "获得一些金币": 30.0, "触发陷阱机关": 15.0},
        fallback_choice="宝箱是空的",  # gets the remaining 50
        total_probability=100.0,
    )`,
	}, wheel)

	plugin.MountCommand(p, plugin.Command{
		Name: "dice_assert", Description: "预设下一次掷骰结果 (decide this chat's next d20 roll)",
		Usage: "/dice_assert <1-20>", Permission: "super",
	}, assertCmd)
	plugin.MountCommand(p, plugin.Command{
		Name: "dice_lock", Description: "锁定之后所有掷骰结果 (fix this chat's d20 rolls until /dice_unlock)",
		Usage: "/dice_lock <1-20>", Permission: "super",
	}, lockCmd)
	plugin.MountCommand(p, plugin.Command{
		Name: "dice_unlock", Description: "解除骰点锁定 (undo /dice_lock)",
		Permission: "super",
	}, unlockCmd)

	p.OnChannelReset(func(ctx context.Context, chatKey string) error {
		_, err := p.Store().DeleteScope(ctx, plugin.Chat(chatKey))
		return err
	})

	plugin.Register(p)
}

// Store keys of a chat's rig. A value of "0" or no value means none.
const (
	assertKey = "assert" // the next roll, consumed by it
	lockKey   = "lock"   // every roll
)

// RollArgs are dice_roll's parameters.
type RollArgs struct {
	EventName   string `json:"event_name" jsonschema:"事件名称 (the event's name)"`
	Description string `json:"description" jsonschema:"事件详细描述 (what is being attempted)"`
	Difficulty  int    `json:"difficulty" jsonschema:"事件难度 1-20: judge the scene and give an objective, reasonable difficulty class"`
}

func roll(ctx *plugin.Ctx, a RollArgs) (string, error) {
	if a.Difficulty < 1 || a.Difficulty > 20 {
		return "", fmt.Errorf("difficulty should be between 1 and 20, got %d", a.Difficulty)
	}
	bonus := luckyBonus(a.Difficulty)
	n, err := nextRoll(ctx)
	if err != nil {
		return "", err
	}
	verdict := judge(n, n+bonus, a.Difficulty)
	shown, noteZH, noteEN := "", "", ""
	if bonus > 0 {
		shown = fmt.Sprintf("(+%d)", bonus)
		noteZH = fmt.Sprintf("(幸运祝福: 骰点 +%d)\n", bonus)
		noteEN = fmt.Sprintf("(Lucky bonus: +%d)", bonus)
	}
	post(ctx, fmt.Sprintf("【检定事件】%s (%d/20)\n> %s\n========\n%s掷骰结果：%d%s 【%s】",
		a.EventName, a.Difficulty, a.Description, noteZH, n, shown, verdict))
	return fmt.Sprintf("[%s] (%d/20) %s roll result: %d%s【%s】\n"+
		"Note: This is only an effect check for the action, not a substitute for the action itself. "+
		"You still need to actually perform (and be able to perform) the corresponding reaction.\n"+
		"Please continue to generate responses and reactions based on the results",
		a.EventName, a.Difficulty, noteEN, n, shown, verdict), nil
}

// luckyBonus is added to a roll at difficulty: models set difficulties
// too high, so at 19 and 20 a bit more than half of the rolls (11 in 20)
// get a bonus of 1 to 3.
func luckyBonus(difficulty int) int {
	if difficulty >= 19 && d(20) < 12 {
		return d(3)
	}
	return 0
}

// d returns a uniform roll of a die with n faces, 1..n.
func d(n int) int { return rand.IntN(n) + 1 }

// judge names the outcome of natural roll n, fixed (n plus bonus) against
// difficulty: a natural 1 that fails is a critical failure, a natural 20
// that succeeds a critical success.
func judge(n, fixed, difficulty int) string {
	switch {
	case fixed == 1 && fixed < difficulty:
		return "大失败！"
	case n == 20 && fixed >= difficulty:
		return "大成功！"
	case fixed < difficulty:
		return "失败"
	}
	return "成功"
}

// nextRoll returns the chat's next natural d20: an asserted value (used
// up by this roll), else the locked value, else a random one.
func nextRoll(ctx *plugin.Ctx) (int, error) {
	st, scope := ctx.Store(), ctx.ChatScope()
	asserted := 0
	if v, found, err := st.Get(ctx, scope, assertKey); err != nil {
		return 0, fmt.Errorf("read the dice settings: %w", err)
	} else if found && face(v) > 0 {
		// Take it atomically: of two rolls racing for it, one gets it.
		_, err := st.Update(ctx, scope, assertKey, func(cur string, _ bool) (string, error) {
			asserted = face(cur)
			return "0", nil
		})
		if err != nil {
			return 0, fmt.Errorf("read the dice settings: %w", err)
		}
	}
	if asserted > 0 {
		return asserted, nil
	}
	v, found, err := st.Get(ctx, scope, lockKey)
	if err != nil {
		return 0, fmt.Errorf("read the dice settings: %w", err)
	}
	if n := face(v); found && n > 0 {
		return n, nil
	}
	return d(20), nil
}

// face parses a stored face, 0 when there is none or it is not 1..20.
func face(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 20 {
		return 0
	}
	return n
}

// post shows text in the chat. The result goes to the model whether or
// not the chat got it, so a failure is only logged.
func post(ctx *plugin.Ctx, text string) {
	if err := ctx.SendText(text); err != nil {
		ctx.Logger().Warn("post the dice result to the chat", "err", err)
	}
}

// WheelArgs are probability_wheel's parameters.
type WheelArgs struct {
	EventName      string             `json:"event_name" jsonschema:"事件名称 (the event's name)"`
	Description    string             `json:"description" jsonschema:"事件详细描述 (what happens)"`
	EventChoices   map[string]float64 `json:"event_choices" jsonschema:"选择项和概率值 {\"outcome\": weight}; weights are not negative and add up to at most total_probability"`
	FallbackChoice string             `json:"fallback_choice,omitempty" default:"\"其他情况\"" jsonschema:"兜底事件名称: the outcome that gets the probability left over"`
	TotalProb      float64            `json:"total_probability,omitempty" default:"100.0" jsonschema:"总概率值: what the weights are out of (default 100.0)"`
}

// outcome is one outcome of the wheel and its weight.
type outcome struct {
	name   string
	weight float64
}

func wheel(ctx *plugin.Ctx, a WheelArgs) (string, error) {
	total := a.TotalProb
	if !(total > 0) || math.IsInf(total, 0) {
		return "", errors.New("total_probability must be a positive number")
	}
	if len(a.EventChoices) == 0 && a.FallbackChoice == "" {
		return "", errors.New("give event_choices or a fallback_choice")
	}
	outcomes, fallback, err := distribute(a.EventChoices, a.FallbackChoice, total)
	if err != nil {
		return "", err
	}
	picked := pick(outcomes, rand.Float64())

	var lines []string
	for _, o := range outcomes {
		if o.weight > 0 {
			marker := "📦"
			if o.name == picked.name {
				marker = "🎯"
			}
			lines = append(lines, fmt.Sprintf("%s %s: %.1f%%", marker, o.name, o.weight/total*100))
		}
	}
	post(ctx, fmt.Sprintf("【轮盘事件】%s\n> %s\n========\n概率分配:\n%s\n\n🎯 选择结果: 【%s】",
		a.EventName, a.Description, strings.Join(lines, "\n"), picked.name))
	return fmt.Sprintf("[Probability Wheel: %s]\nSelected: %s\nProbability: %.1f/%s (%.1f%%)\n"+
		"Fallback '%s' had: %.1f/%s (%.1f%%)\nTotal distributed: %s\n"+
		"Continue your response based on the selected outcome.",
		a.EventName, picked.name, picked.weight, pyFloat(total), picked.weight/total*100,
		fallback.name, fallback.weight, pyFloat(total), fallback.weight/total*100, pyFloat(total)), nil
}

// distribute checks the choices' weights and adds the fallback, which
// gets total minus their sum (added to its weight when it is one of the
// choices). Outcomes come heaviest first, equal weights by name. Choices
// of weight 0 are left out; the fallback is kept, even at 0.
func distribute(choices map[string]float64, fallbackName string, total float64) ([]outcome, outcome, error) {
	if fallbackName == "" {
		fallbackName = "其他情况"
	}
	var outcomes []outcome
	allocated := 0.0
	for name, w := range choices {
		if w < 0 || math.IsNaN(w) || math.IsInf(w, 0) {
			return nil, outcome{}, fmt.Errorf("the probability of %q must be a non-negative number, got %v", name, w)
		}
		if w > 0 {
			outcomes = append(outcomes, outcome{name, w})
			allocated += w
		}
	}
	// A rounding margin, so that 33.3 + 33.3 + 33.4 fits in 100.
	if allocated > total*(1+1e-9) {
		return nil, outcome{}, fmt.Errorf("the choices' probabilities add up to %s, more than total_probability %s",
			pyFloat(allocated), pyFloat(total))
	}
	rest := max(total-allocated, 0)
	i := -1
	for j, o := range outcomes {
		if o.name == fallbackName {
			i = j
		}
	}
	if i < 0 {
		outcomes = append(outcomes, outcome{fallbackName, rest})
		i = len(outcomes) - 1
	} else {
		outcomes[i].weight += rest
	}
	fallback := outcomes[i]
	sort.SliceStable(outcomes, func(a, b int) bool {
		if outcomes[a].weight != outcomes[b].weight {
			return outcomes[a].weight > outcomes[b].weight
		}
		return outcomes[a].name < outcomes[b].name
	})
	return outcomes, fallback, nil
}

// pick returns the outcome that u, uniform in [0, 1), falls on when the
// outcomes' weights are laid end to end. Outcomes of weight 0 are never
// picked unless every weight is 0.
func pick(outcomes []outcome, u float64) outcome {
	sum := 0.0
	for _, o := range outcomes {
		sum += o.weight
	}
	if sum <= 0 {
		return outcomes[0]
	}
	x := u * sum
	last := outcomes[0]
	for _, o := range outcomes {
		if o.weight <= 0 {
			continue
		}
		if x < o.weight {
			return o
		}
		x -= o.weight
		last = o
	}
	return last // rounding: u*sum came out at sum
}

// pyFloat formats f as Python's repr of a float: 100.0, 12.5.
func pyFloat(f float64) string {
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.ContainsAny(s, ".eE") {
		s += ".0"
	}
	return s
}

// FaceArgs are /dice_assert's and /dice_lock's argument.
type FaceArgs struct {
	Value int `json:"value,omitempty" default:"0"`
}

func assertCmd(ctx *plugin.Ctx, a FaceArgs) (string, error) {
	if err := setFace(ctx, assertKey, a.Value, "需要指定一个骰点值"); err != nil {
		return "", err
	}
	return fmt.Sprintf("掷骰检定预言: %d/20", a.Value), nil
}

func lockCmd(ctx *plugin.Ctx, a FaceArgs) (string, error) {
	if err := setFace(ctx, lockKey, a.Value, "需要指定一个锁定的骰点值"); err != nil {
		return "", err
	}
	return fmt.Sprintf("骰点已锁定为 %d", a.Value), nil
}

func setFace(ctx *plugin.Ctx, key string, n int, missing string) error {
	if n == 0 {
		return errors.New(missing)
	}
	if n < 1 || n > 20 {
		return errors.New("骰点值应在 1 到 20 之间")
	}
	if _, err := ctx.Store().Set(ctx, ctx.ChatScope(), key, strconv.Itoa(n)); err != nil {
		return fmt.Errorf("save the dice setting: %w", err)
	}
	return nil
}

// unlockCmd lifts the lock; as in the reference, an assertion still
// waiting for its roll stays.
func unlockCmd(ctx *plugin.Ctx, _ struct{}) (string, error) {
	if _, err := ctx.Store().Delete(ctx, ctx.ChatScope(), lockKey); err != nil {
		return "", fmt.Errorf("clear the dice lock: %w", err)
	}
	return "骰点锁定已解除", nil
}
