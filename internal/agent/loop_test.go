package agent_test

// The turn loop where it lives: the scripted model (llmtest) and a
// scripted runner (sandboxtest), the rest real (runtime, RPC server,
// plugins, chat store). Each test is one rule of the protocol: what a
// run's stop type does to the turn.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nekro-go/nekro/internal/agent"
	"github.com/nekro-go/nekro/internal/app"
	"github.com/nekro-go/nekro/internal/app/apptest"
	"github.com/nekro-go/nekro/internal/chat"
	"github.com/nekro-go/nekro/internal/host"
	"github.com/nekro-go/nekro/internal/llm"
	"github.com/nekro-go/nekro/internal/llm/llmtest"
	"github.com/nekro-go/nekro/internal/runtime"
	"github.com/nekro-go/nekro/internal/sandbox"
	"github.com/nekro-go/nekro/internal/sandbox/sandboxtest"
	"github.com/nekro-go/nekro/internal/testutil"
	"github.com/nekro-go/nekro/plugin"
)

// loopPlugin has one method of each type.
func loopPlugin() *plugin.Plugin {
	p := plugin.New(plugin.Meta{Name: "loop", ModuleName: "loop_test", Author: "nekro"})
	type ab struct {
		A int `json:"a"`
		B int `json:"b"`
	}
	type text struct {
		Text string `json:"text"`
	}
	plugin.MountSandboxMethod(p, plugin.Method{Type: plugin.Tool, Name: "add", Doc: "Add."},
		func(_ *plugin.Ctx, a ab) (int, error) { return a.A + a.B, nil })
	plugin.MountSandboxMethod(p, plugin.Method{Type: plugin.Tool, Name: "refuse", Doc: "Fails."},
		func(_ *plugin.Ctx, a text) (string, error) { return "", errors.New("refused: " + a.Text) })
	plugin.MountSandboxMethod(p, plugin.Method{Type: plugin.Agent, Name: "lookup", Doc: "Looks up."},
		func(_ *plugin.Ctx, a text) (string, error) { return "FOUND(" + a.Text + ")", nil })
	plugin.MountSandboxMethod(p, plugin.Method{Type: plugin.Behavior, Name: "remember", Doc: "Remembers."},
		func(_ *plugin.Ctx, a text) (string, error) { return "REMEMBERED(" + a.Text + ")", nil })
	plugin.MountSandboxMethod(p, plugin.Method{Type: plugin.MultimodalAgent, Name: "look", Doc: "Looks."},
		func(_ *plugin.Ctx, a text) ([]plugin.ContentPart, error) {
			return []plugin.ContentPart{plugin.TextPart("SAW(" + a.Text + ")"),
				plugin.ImagePart("data:image/png;base64,iVBORw0KGgo=")}, nil
		})
	return p
}

// loop is one agent over the scripted runner and model.
type loop struct {
	app    *app.App
	model  *llmtest.Server
	runner *sandboxtest.Runner
}

// newLoop assembles nekro with the scripted runner, the test plugin and
// a model answering with script.
func newLoop(t *testing.T, script llmtest.Script, cfg agent.Config) *loop {
	t.Helper()
	model, err := llmtest.Start(script)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { model.Close() })
	runner := &sandboxtest.Runner{}
	if cfg.MaxIterations == 0 {
		cfg.MaxIterations = 4
	}
	a, err := apptest.Open(t, app.Config{
		DataDir: testutil.DataDir(t),
		Runtime: runtime.Config{Runner: runner, Limits: sandbox.Limits{Timeout: 10 * time.Second}},
		Host:    host.Config{Plugins: []*plugin.Plugin{loopPlugin()}},
		LLM:     llm.Config{BaseURL: model.URL, Model: "scripted", APIKey: "sk-test", MaxRetries: -1},
		Agent:   cfg,
	})
	if err != nil {
		t.Fatal(err)
	}
	return &loop{app: a, model: model, runner: runner}
}

// post sends a user message and waits for the turn it starts to end.
func (l *loop) post(t *testing.T, chatKey, text string) chat.Turn {
	t.Helper()
	if _, err := l.app.Agent.Post(context.Background(), agent.Incoming{ChatKey: chatKey, UserID: "u1", UserName: "U", Text: text}); err != nil {
		t.Fatalf("post: %v", err)
	}
	return l.waitTurn(t, chatKey)
}

// waitTurn waits (generously: a slow machine) for the chat's last turn
// to end.
func (l *loop) waitTurn(t *testing.T, chatKey string) chat.Turn {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		turns, err := l.app.Chats.Turns(context.Background(), chatKey)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(turns); n > 0 && turns[n-1].Status != chat.TurnRunning {
			return turns[n-1]
		}
		if time.Now().After(deadline) {
			t.Fatalf("the turn of %s did not end within 60 s: %+v", chatKey, turns)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// history returns the chat's messages as "role: text" lines.
func (l *loop) history(t *testing.T, chatKey string) string {
	t.Helper()
	ms, err := l.app.Chats.History(context.Background(), chatKey, 100)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, m := range ms {
		fmt.Fprintf(&b, "%s: %s\n", m.Role, m.Text)
	}
	return b.String()
}

// requests returns the texts of the last message of each model request.
func (l *loop) lasts() []string {
	var out []string
	for _, r := range l.model.Requests() {
		out = append(out, r.Last())
	}
	return out
}

// byRound answers the n-th request of a turn (1-based) with replies[n-1],
// the last one again after that.
func byRound(replies ...llmtest.Reply) llmtest.Script {
	var n atomic.Int32
	return func(llmtest.Request) llmtest.Reply {
		i := int(n.Add(1)) - 1
		return replies[min(i, len(replies)-1)]
	}
}

func TestNormalEndsTheTurn(t *testing.T) {
	l := newLoop(t, byRound(llmtest.Code("call add {\"a\": 2, \"b\": 3}\nprint done")), agent.Config{})
	turn := l.post(t, "normal", "add please")
	if turn.Status != chat.TurnDone || turn.Iterations != 1 || turn.Requests != 1 {
		t.Fatalf("turn: %+v", turn)
	}
	runs, _ := l.app.Chats.Runs(context.Background(), "normal")
	if len(runs) != 1 || runs[0].StopType != "NORMAL" || !strings.Contains(runs[0].Output, "add -> 5") {
		t.Fatalf("runs: %+v", runs)
	}
}

func TestErrorGoesBackWithItsOutput(t *testing.T) {
	l := newLoop(t, byRound(
		llmtest.Code("call refuse {\"text\": \"nope\"}\nprint Traceback: boom\nexit 1"),
		llmtest.Code("print fixed")), agent.Config{})
	turn := l.post(t, "error", "go")
	if turn.Status != chat.TurnDone || turn.Iterations != 2 || turn.Requests != 2 {
		t.Fatalf("turn: %+v", turn)
	}
	second := l.lasts()[1]
	for _, want := range []string{"Traceback: boom", "refused: nope", "ended with an error", "attempt 1 of 4"} {
		if !strings.Contains(second, want) {
			t.Errorf("the feedback lacks %q:\n%s", want, second)
		}
	}
}

func TestTimeoutGoesBackAndSaysSo(t *testing.T) {
	l := newLoop(t, byRound(llmtest.Code("print started\nhang"), llmtest.Code("print quick")),
		agent.Config{Limits: sandbox.Limits{Timeout: 300 * time.Millisecond}})
	turn := l.post(t, "timeout", "go")
	if turn.Status != chat.TurnDone || turn.Iterations != 2 {
		t.Fatalf("turn: %+v", turn)
	}
	runs, _ := l.app.Chats.Runs(context.Background(), "timeout")
	if runs[0].StopType != "TIMEOUT" {
		t.Errorf("first run: %+v", runs[0])
	}
	if second := l.lasts()[1]; !strings.Contains(second, "past its time limit") {
		t.Errorf("the feedback does not say the run timed out:\n%s", second)
	}
}

func TestAgentFeedsANewRound(t *testing.T) {
	l := newLoop(t, byRound(
		llmtest.Code("call lookup {\"text\": \"cats\"}\nexit 8\nprint never"),
		llmtest.Code("print answered")), agent.Config{})
	turn := l.post(t, "agent", "look up cats")
	if turn.Status != chat.TurnDone || turn.Iterations != 2 || turn.Requests != 2 {
		t.Fatalf("turn: %+v", turn)
	}
	second := l.lasts()[1]
	if !strings.Contains(second, "lookup returned") || !strings.Contains(second, "FOUND(cats)") {
		t.Errorf("the agent result is not fed back:\n%s", second)
	}
	runs, _ := l.app.Chats.Runs(context.Background(), "agent")
	if runs[0].StopType != "AGENT" || runs[0].AgentMethod != "lookup" {
		t.Errorf("first run: %+v", runs[0])
	}
	if strings.Contains(runs[0].Output, "never") {
		t.Errorf("the run went on after its AGENT call: %q", runs[0].Output)
	}
}

func TestMultimodalAgentFeedsTextAndImages(t *testing.T) {
	l := newLoop(t, byRound(
		llmtest.Code("call look {\"text\": \"sky\"}\nexit 11"),
		llmtest.Code("print seen")), agent.Config{})
	turn := l.post(t, "multimodal", "look at the sky")
	if turn.Status != chat.TurnDone || turn.Iterations != 2 {
		t.Fatalf("turn: %+v", turn)
	}
	reqs := l.model.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model requests", len(reqs))
	}
	if !reqs[1].Contains("SAW(sky)") {
		t.Errorf("the multimodal text is not fed back")
	}
	if urls := reqs[1].ImageURLs(); len(urls) != 1 || !strings.HasPrefix(urls[0], "data:image/png") {
		t.Errorf("the multimodal image is not fed back: %v", urls)
	}
}

func TestBehaviorRecordsASystemMessageAndGoesOn(t *testing.T) {
	l := newLoop(t, byRound(llmtest.Code("call remember {\"text\": \"tea\"}\nprint after")), agent.Config{})
	turn := l.post(t, "behavior", "remember tea")
	if turn.Status != chat.TurnDone || turn.Iterations != 1 {
		t.Fatalf("turn: %+v", turn)
	}
	if h := l.history(t, "behavior"); !strings.Contains(h, "system: ") || !strings.Contains(h, "REMEMBERED(tea)") {
		t.Errorf("no system message holds the BEHAVIOR result:\n%s", h)
	}
	runs, _ := l.app.Chats.Runs(context.Background(), "behavior")
	if !strings.Contains(runs[0].Output, "after") {
		t.Errorf("the run did not go on after the BEHAVIOR call: %q", runs[0].Output)
	}
}

func TestMaxIterationsEndsTheTurn(t *testing.T) {
	l := newLoop(t, byRound(llmtest.Code("print still failing\nexit 1")), agent.Config{MaxIterations: 3})
	turn := l.post(t, "giveup", "go")
	if turn.Status != chat.TurnFailed || turn.Iterations != 3 || turn.Requests != 3 {
		t.Fatalf("turn: %+v", turn)
	}
	if !strings.Contains(turn.Error, "gave up after 3 runs") {
		t.Errorf("turn error: %q", turn.Error)
	}
	if len(l.runner.Scripts()) != 3 {
		t.Errorf("%d runs, want 3", len(l.runner.Scripts()))
	}
}

func TestProseIsTheAssistantsMessage(t *testing.T) {
	l := newLoop(t, byRound(llmtest.Reply{Text: "Hello! How can I help you today?"}), agent.Config{})
	turn := l.post(t, "prose", "hi")
	if turn.Status != chat.TurnDone || turn.Iterations != 0 {
		t.Fatalf("turn: %+v", turn)
	}
	if h := l.history(t, "prose"); !strings.Contains(h, "assistant: Hello! How can I help you today?") {
		t.Errorf("the reply is not the assistant's message:\n%s", h)
	}
	if n := len(l.runner.Scripts()); n != 0 {
		t.Errorf("prose was run as code (%d runs)", n)
	}
}

func TestModelErrorFailsTheTurnAndSaysSo(t *testing.T) {
	l := newLoop(t, byRound(llmtest.Reply{Status: 500, Text: "upstream exploded"}), agent.Config{})
	turn := l.post(t, "modelerr", "hi")
	if turn.Status != chat.TurnFailed || !strings.Contains(turn.Error, "the model did not answer") {
		t.Fatalf("turn: %+v", turn)
	}
	if n := len(l.runner.Scripts()); n != 0 {
		t.Errorf("%d runs after a failed model request", n)
	}
}

func TestShutdownInterruptsARunningTurn(t *testing.T) {
	l := newLoop(t, byRound(llmtest.Code("print waiting\nhang")), agent.Config{Limits: sandbox.Limits{Timeout: time.Minute}})
	if _, err := l.app.Agent.Post(context.Background(), agent.Incoming{ChatKey: "cancel", UserID: "u1", UserName: "U", Text: "go"}); err != nil {
		t.Fatal(err)
	}
	// Wait for the run to have started, then shut down with a deadline
	// that has passed: the turn is cancelled, not waited for.
	for deadline := time.Now().Add(60 * time.Second); len(l.runner.Scripts()) == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the run never started")
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	l.app.Agent.Shutdown(ctx)
	turn := l.waitTurn(t, "cancel")
	if turn.Status != chat.TurnInterrupted {
		t.Fatalf("turn: %+v", turn)
	}
}

// A server keeps scheduling state only for the chats active now: once
// their turns (and a reset) are over, nothing of them stays in memory.
func TestFinishedChatsLeaveNoState(t *testing.T) {
	l := newLoop(t, byRound(llmtest.Code("print done")), agent.Config{})
	for i := range 20 {
		l.post(t, fmt.Sprintf("gone-%d", i), "hi")
	}
	if _, err := l.app.Agent.ResetCount(context.Background(), "gone-3"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for l.app.Agent.ChatStates() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d chats' states stayed after their turns ended", l.app.Agent.ChatStates())
		}
		time.Sleep(10 * time.Millisecond)
	}
	// A chat dropped from memory still answers its next message.
	if turn := l.post(t, "gone-3", "again"); turn.Status != chat.TurnDone {
		t.Fatalf("turn after the state was dropped: %+v", turn)
	}
}
