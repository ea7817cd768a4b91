package agent_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nekro-go/nekro/internal/agent"
	"github.com/nekro-go/nekro/internal/chat"
	"github.com/nekro-go/nekro/internal/llm"
	"github.com/nekro-go/nekro/internal/llm/llmtest"
)

// isSummaryRequest tells the agent's summary requests from turns'.
func isSummaryRequest(r llmtest.Request) bool {
	return len(r.Messages) > 0 && strings.Contains(r.Messages[0].Content.String(), "You write the summary of a chat's older messages")
}

// longMessage is about 200 tokens of words, numbered.
func longMessage(i int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "message %d:", i)
	for j := 0; j < 180; j++ {
		fmt.Fprintf(&b, " word%c", 'a'+rune(j%26))
	}
	return b.String()
}

// setWindow gives the default group a context window and max_tokens.
func setWindow(t *testing.T, l *loop, window, maxTokens int) llm.Window {
	t.Helper()
	ctx := context.Background()
	set, err := l.app.Models.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range set.Groups {
		set.Groups[i].ContextWindow, set.Groups[i].MaxTokens = window, maxTokens
	}
	if err := l.app.Models.Put(ctx, set); err != nil {
		t.Fatal(err)
	}
	w, err := l.app.Models.Window(ctx, "")
	if err != nil || w.Tokens != window {
		t.Fatalf("window: %+v %v", w, err)
	}
	return w
}

// A chat longer than its window: every turn's prompt fits, older
// messages are replaced by the summary the model wrote, which later
// turns reuse (it is asked for once every several turns, not every
// turn), the turns' records say so, `chats prompt` shows it, and a reset
// erases it.
func TestLongChatIsSummarizedWithinTheWindow(t *testing.T) {
	var summaries atomic.Int32
	l := newLoop(t, func(r llmtest.Request) llmtest.Reply {
		if isSummaryRequest(r) {
			n := summaries.Add(1)
			return llmtest.Reply{Text: fmt.Sprintf("SUMMARY-%d: user U sent numbered messages of words.", n)}
		}
		return llmtest.Reply{Text: "Noted, thank you!"}
	}, agent.Config{})
	w := setWindow(t, l, 4000, 500)
	const turns = 30
	var records []chat.Turn
	for i := 1; i <= turns; i++ {
		records = append(records, postTurn(t, l, "long", longMessage(i)))
	}
	firstSummary := -1
	for i, r := range l.model.Requests() {
		if isSummaryRequest(r) {
			if firstSummary < 0 {
				firstSummary = i
			}
			for _, m := range r.Messages[1:] {
				if !strings.Contains(m.Content.String(), "<messages>") {
					t.Errorf("a summary request without its messages: %.200s", m.Content.String())
				}
			}
			continue
		}
		if n := llm.EstimatePrompt(r.Messages); n > w.Prompt() {
			t.Errorf("request %d: %d tokens estimated, over the %d the window leaves", i, n, w.Prompt())
		}
	}
	n := int(summaries.Load())
	if firstSummary < 0 || n < 1 || n > turns/4 {
		t.Fatalf("%d summaries for %d turns: want at least one, and far fewer than turns", n, turns)
	}
	t.Logf("%d turns, %d summaries; first summary at request %d", turns, n, firstSummary)
	last := records[len(records)-1]
	pc := last.Context
	if pc == nil || !pc.Summary || pc.SummaryCovered == 0 || pc.SummaryThrough == 0 || pc.Window != 4000 || pc.Reserve != 500 ||
		pc.Tokens > w.Prompt() || pc.Omitted != 0 || pc.Shown == 0 {
		t.Fatalf("the last turn's context: %+v", pc)
	}
	summarizedInPath := 0
	for _, r := range records {
		if r.Context != nil {
			summarizedInPath += r.Context.Summarized
		}
	}
	t.Logf("the last turn: %+v; messages summarized inside turns: %d", *pc, summarizedInPath)
	reqs := l.model.Requests()
	lastPrompt := reqs[len(reqs)-1]
	if isSummaryRequest(lastPrompt) {
		lastPrompt = reqs[len(reqs)-2]
	}
	if !lastPrompt.Contains(fmt.Sprintf("SUMMARY-%d", n)) && !lastPrompt.Contains(fmt.Sprintf("SUMMARY-%d", n-1)) {
		t.Errorf("the last turn's prompt shows no recent summary:\n%.2000s", lastPrompt.Last())
	}
	if !lastPrompt.Contains(longMessage(turns)) || lastPrompt.Contains(longMessage(1)) {
		t.Error("the last prompt should show the newest message and not the first")
	}
	// Summaries cover what they replace, the previous summary included.
	for _, r := range reqs {
		if isSummaryRequest(r) && strings.Contains(r.Last(), "SUMMARY-") && !strings.Contains(r.Last(), "<previous_summary") {
			t.Error("a summary request shows an earlier summary outside <previous_summary>")
		}
	}

	// `nekro chats prompt` (Agent.Prompt) shows the kept summary in place.
	msgs, err := l.app.Agent.Prompt(context.Background(), "long", "u1")
	if err != nil {
		t.Fatal(err)
	}
	if got := msgs[1].Content.String(); !strings.Contains(got, "<history_summary>") || !strings.Contains(got, "SUMMARY-") {
		t.Errorf("the prompt shows no summary:\n%.1500s", got)
	}
	if n := llm.EstimatePrompt(msgs); n > w.Prompt() {
		t.Errorf("the prompt is %d tokens, over %d", n, w.Prompt())
	}

	// A reset erases the summary: the next prompt has none.
	if err := l.app.Agent.Reset(context.Background(), "long"); err != nil {
		t.Fatal(err)
	}
	if h, err := l.app.Chats.HistorySummaryOf(context.Background(), "long"); err != nil || h != nil {
		t.Fatalf("a reset kept the summary: %+v %v", h, err)
	}
	rec := postTurn(t, l, "long", "hello again")
	if rec.Context == nil || rec.Context.Summary || rec.Context.Omitted != 0 {
		t.Errorf("the turn after the reset: %+v", rec.Context)
	}
}

// A turn whose history overflows with no summary ready, and whose
// summary request fails: it still answers, its prompt fits, the older
// messages are left out with a note, and its record says why.
func TestFailedSummaryCutsTheHistory(t *testing.T) {
	var failing atomic.Bool
	l := newLoop(t, func(r llmtest.Request) llmtest.Reply {
		if isSummaryRequest(r) {
			if failing.Load() {
				return llmtest.Reply{Status: http.StatusInternalServerError, Text: "summaries are down"}
			}
			return llmtest.Reply{Text: "a summary"}
		}
		return llmtest.Reply{Text: "Noted, thank you!"}
	}, agent.Config{})
	failing.Store(true)
	// Messages stored without turns (as a platform's history would be),
	// then one turn over all of them.
	ctx := context.Background()
	for i := 1; i <= 40; i++ {
		if _, err := l.app.Chats.AddMessage(ctx, chat.Message{ChatKey: "cut", Role: chat.User, SenderID: "u1", SenderName: "U",
			Text: longMessage(i), TurnID: chat.NoTurn}); err != nil {
			t.Fatal(err)
		}
	}
	w := setWindow(t, l, 4000, 500)
	rec := postTurn(t, l, "cut", "what did I say?")
	if rec.Status != chat.TurnDone {
		t.Fatalf("turn: %+v", rec)
	}
	pc := rec.Context
	if pc == nil || pc.Summary || pc.Omitted == 0 || pc.Tokens > w.Prompt() || !strings.Contains(pc.Note, "summaries are down") {
		t.Fatalf("the turn's context: %+v", pc)
	}
	var turnReq llmtest.Request
	for _, r := range l.model.Requests() {
		if !isSummaryRequest(r) {
			turnReq = r
		}
	}
	if !turnReq.Contains("older message(s) left out: the history shown is cut to the model's context window") {
		t.Errorf("the prompt does not say what was left out:\n%.600s", turnReq.Last())
	}
	if n := llm.EstimatePrompt(turnReq.Messages); n > w.Prompt() {
		t.Errorf("the prompt is %d tokens, over %d", n, w.Prompt())
	}

	// Once the summary model answers again, the next turn, finding no
	// summary ready, writes one before its prompt, and says so.
	// (The refresh after that turn failed too: two summary requests.)
	for deadline := time.Now().Add(30 * time.Second); countSummaryRequests(l) < 2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d summary requests, want 2: the turn's and the refresh's after it", countSummaryRequests(l))
		}
	}
	failing.Store(false)
	rec = postTurn(t, l, "cut", "and now?")
	if pc := rec.Context; pc == nil || !pc.Summary || pc.Summarized == 0 || pc.Omitted != 0 || pc.Note != "" || pc.Tokens > w.Prompt() {
		t.Fatalf("the turn that summarized: %+v", rec.Context)
	}
	if rec.Requests != 2 {
		t.Errorf("the turn that summarized made %d model requests, want 2 (the summary and its own)", rec.Requests)
	}
}

// A short chat: the prompt is the one it always was (no summary, no
// note), and the record says it fit.
func TestShortChatPromptUnchanged(t *testing.T) {
	l := newLoop(t, func(r llmtest.Request) llmtest.Reply { return llmtest.Reply{Text: "Noted, thank you!"} }, agent.Config{})
	rec := postTurn(t, l, "short", "hello")
	if pc := rec.Context; pc == nil || pc.Summary || pc.Omitted != 0 || pc.Shown != 1 || pc.Window != llm.DefaultContextWindow || pc.Tokens <= pc.Fixed {
		t.Fatalf("context: %+v", rec.Context)
	}
	reqs := l.model.Requests()
	if len(reqs) != 1 || reqs[0].Contains("[nekro:") || reqs[0].Contains("history_summary") {
		t.Fatalf("requests: %d; %.500s", len(reqs), reqs[0].Last())
	}
	if want := agent.HistoryPrompt("short", mustHistory(t, l, "short")[:1], mustHistory(t, l, "short")[:1]); !strings.HasSuffix(reqs[0].Last(), want) {
		t.Errorf("the history is not rendered as HistoryPrompt renders it:\n%s\nwant suffix:\n%s", reqs[0].Last(), want)
	}
}

func countSummaryRequests(l *loop) int {
	n := 0
	for _, r := range l.model.Requests() {
		if isSummaryRequest(r) {
			n++
		}
	}
	return n
}

// postTurn posts a user message and waits for the turn that answers it
// (one turn per message: loop.post may return the previous turn).
func postTurn(t *testing.T, l *loop, chatKey, text string) chat.Turn {
	t.Helper()
	ctx := context.Background()
	before, err := l.app.Chats.Turns(ctx, chatKey)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.app.Agent.Post(ctx, agent.Incoming{ChatKey: chatKey, UserID: "u1", UserName: "U", Text: text}); err != nil {
		t.Fatalf("post: %v", err)
	}
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		ts, err := l.app.Chats.Turns(ctx, chatKey)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(ts); n > len(before) && ts[n-1].Status != chat.TurnRunning {
			return ts[n-1]
		}
	}
	t.Fatalf("no turn of %s ended within 60 s", chatKey)
	return chat.Turn{}
}

func mustHistory(t *testing.T, l *loop, chatKey string) []chat.Message {
	t.Helper()
	ms, err := l.app.Chats.History(context.Background(), chatKey, 0)
	if err != nil {
		t.Fatal(err)
	}
	return ms
}

// The memory's block counts with the prompt's fixed parts: with it, the
// history gets less room, and the prompt, block included, fits.
func TestMemoryBlockCountsInTheWindow(t *testing.T) {
	mem := &fakeMemory{block: "<memories>\n" + strings.Repeat("- about the chat: it likes owls and long walks\n", 60) + "</memories>\n"}
	l := newLoop(t, func(r llmtest.Request) llmtest.Reply {
		if isSummaryRequest(r) {
			return llmtest.Reply{Text: "SUMMARY: owls."}
		}
		return llmtest.Reply{Text: "Noted, thank you!"}
	}, agent.Config{Memory: mem})
	w := setWindow(t, l, 4000, 500)
	var rec chat.Turn
	for i := 1; i <= 12; i++ {
		rec = postTurn(t, l, "mem", longMessage(i))
	}
	blockTokens := llm.EstimateTokens(mem.block)
	if pc := rec.Context; pc == nil || pc.Fixed < blockTokens || pc.Tokens > w.Prompt() || !pc.Summary {
		t.Fatalf("the last turn's context (block %d tokens): %+v", blockTokens, rec.Context)
	}
	for _, r := range l.model.Requests() {
		if isSummaryRequest(r) {
			continue
		}
		if !strings.HasSuffix(r.Messages[1].Content.String(), mem.block) {
			t.Fatal("the memory's block does not end the turn's user message")
		}
		if n := llm.EstimatePrompt(r.Messages); n > w.Prompt() {
			t.Errorf("a prompt with the memory's block is %d tokens, over %d", n, w.Prompt())
		}
	}
}
