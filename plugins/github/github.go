// Package github is the built-in plugin nekro.github, a port of the
// reference's github plugin: a chat subscribes to GitHub repositories
// (subscribe_github_repo, unsubscribe_github_repo,
// get_github_subscriptions, update_github_subscription_events), and the
// repositories' webhook events (push, issues, pull_request, release)
// arrive at POST /api/webhook/github, are formatted as the reference
// formats them and pushed into every subscribed chat as a system message
// that wakes the agent (the reference's trigger_agent=True).
//
// Point a repository's webhook (Settings → Webhooks) at
// http(s)://<nekro>/api/webhook/github, content type application/json
// (form-encoded payloads are read too), with a Secret; put the same
// secret in this plugin's WEBHOOK_SECRET setting
// (`nekro plugins config nekro.github --set WEBHOOK_SECRET=...`). Calls
// are then checked against GitHub's X-Hub-Signature-256; without a
// secret only calls carrying the API token are accepted.
//
// Deviations from the reference, each on purpose:
//
//   - The signature is checked, by the server, before the handler runs,
//     over the raw body. The reference's check hashed json.dumps of the
//     parsed body (never what GitHub signed), looked the header up under
//     a key its lowercase header dict never held, and with no secret
//     configured accepted anyone's call.
//   - The methods act on the run's own chat only, as the reference's do
//     (they take no chat key); a chat's subscriptions live in its own KV
//     scope under the reference's key github_subs, changed with
//     Store.Update so concurrent changes lose nothing. Chats that ever
//     subscribed are listed in the plugin's global scope, so an event
//     reaches them without scanning every chat of the database.
//   - Events other than push, issues, pull_request and release (star,
//     workflow runs, checks, ...) are logged and not pushed: the
//     reference pushed generic dumps of them. A ping is logged.
//   - unsubscribe_github_repo of a repository not subscribed is an error
//     in every case (the reference's passed silently when the chat had
//     other subscriptions).
package github

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/nekro-go/nekro/plugin"
)

var p = plugin.New(plugin.Meta{
	Name:        "GitHub 消息推送",
	ModuleName:  "github",
	Author:      "nekro",
	Version:     "1.0.0",
	Description: "Receives GitHub webhook events (signed) and pushes them to the chats subscribed to the repository.",
})

// Settings are the reference's GitHubConfig.
type Settings struct {
	WebhookSecret string `json:"WEBHOOK_SECRET" title:"GitHub Webhook 密钥" description:"the repository webhook's Secret: calls to /api/webhook/github must be signed with it (X-Hub-Signature-256); empty accepts only calls carrying the API token" secret:"true"`
}

var settings = plugin.MountConfig(p, Settings{})

// Store keys: a chat's subscriptions (chat scope, the reference's key)
// and the chats that ever subscribed (global scope).
const (
	subsKey  = "github_subs"
	chatsKey = "subscribed_chats"
)

// defaultEvents are the reference's.
var defaultEvents = []string{"push", "issues", "pull_request", "release", "star"}

// RepoSubscription is the reference's RepoSubscription, in its JSON.
type RepoSubscription struct {
	RepoName    string   `json:"repo_name"`
	Events      []string `json:"events"`
	CreatedAt   float64  `json:"created_at"`
	LastUpdated float64  `json:"last_updated"`
}

// chatSubs is the reference's ChatSubscriptions.
type chatSubs struct {
	Subscriptions map[string]*RepoSubscription `json:"subscriptions"`
}

func parseSubs(v string, found bool) (*chatSubs, error) {
	cs := &chatSubs{Subscriptions: map[string]*RepoSubscription{}}
	if !found || v == "" {
		return cs, nil
	}
	if err := json.Unmarshal([]byte(v), cs); err != nil {
		return nil, fmt.Errorf("the chat's subscriptions are unreadable: %w", err)
	}
	if cs.Subscriptions == nil {
		cs.Subscriptions = map[string]*RepoSubscription{}
	}
	return cs, nil
}

func (cs *chatSubs) json() (string, error) {
	b, err := json.Marshal(cs)
	return string(b), err
}

func (cs *chatSubs) subscribed(repo, event string) bool {
	s, ok := cs.Subscriptions[repo]
	return ok && slices.Contains(s.Events, event)
}

func now() float64 { return float64(time.Now().UnixMicro()) / 1e6 }

func stamp(t float64) string {
	return time.UnixMicro(int64(t * 1e6)).Format("2006-01-02 15:04:05")
}

func normEvents(events []string) []string {
	var out []string
	for _, e := range events {
		if e = strings.TrimSpace(e); e != "" && !slices.Contains(out, e) {
			out = append(out, e)
		}
	}
	sort.Strings(out)
	return out
}

// render is the reference's render_prompts.
func (cs *chatSubs) render() string {
	if len(cs.Subscriptions) == 0 {
		return "当前没有GitHub仓库订阅 (使用 `subscribe_github_repo` 添加订阅)"
	}
	var lines []string
	for _, name := range slices.Sorted(mapsKeys(cs.Subscriptions)) {
		s := cs.Subscriptions[name]
		lines = append(lines, fmt.Sprintf("* %s (订阅事件: %s, 创建时间: %s)",
			plugin.EscapePrompt(s.RepoName), plugin.EscapePrompt(strings.Join(s.Events, ", ")), stamp(s.CreatedAt)))
	}
	return "GitHub订阅仓库列表:\n" + strings.Join(lines, "\n")
}

func mapsKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// SubscribeArgs are subscribe_github_repo's parameters.
type SubscribeArgs struct {
	RepoName string   `json:"repo_name" jsonschema:"仓库名称，格式为 'owner/repo'"`
	Events   []string `json:"events,omitempty" jsonschema:"要订阅的事件类型列表，默认包括 [\"push\", \"issues\", \"pull_request\", \"release\", \"star\"]"`
}

// RepoArgs are unsubscribe_github_repo's parameters.
type RepoArgs struct {
	RepoName string `json:"repo_name" jsonschema:"仓库名称，格式为 'owner/repo'"`
}

// UpdateArgs are update_github_subscription_events' parameters.
type UpdateArgs struct {
	RepoName string   `json:"repo_name" jsonschema:"仓库名称，格式为 'owner/repo'"`
	Events   []string `json:"events" jsonschema:"要订阅的事件类型列表"`
}

// NoArgs is get_github_subscriptions' (none).
type NoArgs struct{}

// SubscriptionView is one repository in get_github_subscriptions' result.
type SubscriptionView struct {
	Events      []string `json:"events"`
	CreatedAt   string   `json:"created_at"`
	LastUpdated string   `json:"last_updated"`
}

func checkRepo(name string) error {
	owner, repo, ok := strings.Cut(name, "/")
	if !ok || owner == "" || repo == "" || strings.ContainsAny(name, " \t\n") || strings.Count(name, "/") != 1 {
		return fmt.Errorf("repo_name %q must be 'owner/repo'", name)
	}
	return nil
}

func init() {
	plugin.MountSandboxMethod(p, plugin.Method{
		Type: plugin.Behavior, Name: "subscribe_github_repo", Description: "订阅GitHub仓库",
		Doc: "订阅GitHub仓库消息 (this chat's)\n\nReturns:\n    str: 订阅结果消息",
	}, subscribe)
	plugin.MountSandboxMethod(p, plugin.Method{
		Type: plugin.Behavior, Name: "unsubscribe_github_repo", Description: "取消订阅GitHub仓库",
		Doc: "取消订阅GitHub仓库消息 (this chat's)\n\nReturns:\n    str: 取消订阅结果消息",
	}, unsubscribe)
	plugin.MountSandboxMethod(p, plugin.Method{
		Type: plugin.Tool, Name: "get_github_subscriptions", Description: "获取GitHub仓库订阅列表",
		Doc: "获取当前频道的GitHub仓库订阅列表\n\nReturns:\n    Dict: 订阅列表信息 ({repo_name: {events, created_at, last_updated}})",
	}, list)
	plugin.MountSandboxMethod(p, plugin.Method{
		Type: plugin.Tool, Name: "update_github_subscription_events", Description: "更新GitHub仓库订阅事件",
		Doc: "更新GitHub仓库订阅的事件类型\n\nReturns:\n    str: 更新结果消息",
	}, updateEvents)
	p.OnPromptInject(func(ctx *plugin.Ctx) (string, error) {
		v, found, err := ctx.Store().Get(ctx, plugin.Chat(ctx.ChatKey()), subsKey)
		if err != nil {
			return "", err
		}
		cs, err := parseSubs(v, found)
		if err != nil {
			return "", err
		}
		return cs.render(), nil
	})
	p.MountWebhook("github", func() string { return settings.Get().WebhookSecret }, handleWebhook)
	plugin.Register(p)
}

// changeSubs changes the run's chat's subscriptions atomically.
func changeSubs(ctx *plugin.Ctx, fn func(cs *chatSubs) error) error {
	_, err := ctx.Store().Update(ctx, plugin.Chat(ctx.ChatKey()), subsKey, func(cur string, found bool) (string, error) {
		cs, err := parseSubs(cur, found)
		if err != nil {
			return "", err
		}
		if err := fn(cs); err != nil {
			return "", err
		}
		return cs.json()
	})
	return err
}

func subscribe(ctx *plugin.Ctx, a SubscribeArgs) (string, error) {
	if err := checkRepo(a.RepoName); err != nil {
		return "", err
	}
	events := normEvents(a.Events)
	err := changeSubs(ctx, func(cs *chatSubs) error {
		if s, ok := cs.Subscriptions[a.RepoName]; ok {
			if len(events) > 0 { // as the reference: events given replace the old
				s.Events, s.LastUpdated = events, now()
			}
			events = s.Events
			return nil
		}
		if len(events) == 0 {
			events = normEvents(defaultEvents)
		}
		t := now()
		cs.Subscriptions[a.RepoName] = &RepoSubscription{RepoName: a.RepoName, Events: events, CreatedAt: t, LastUpdated: t}
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("订阅GitHub仓库失败: %w", err)
	}
	// The index the webhook walks; a chat stays in it (an event skips a
	// chat with no subscription left).
	chat := ctx.ChatKey()
	if _, err := ctx.Store().Update(ctx, plugin.Global(), chatsKey, func(cur string, found bool) (string, error) {
		var chats []string
		if found {
			if err := json.Unmarshal([]byte(cur), &chats); err != nil {
				return "", err
			}
		}
		if !slices.Contains(chats, chat) {
			chats = append(chats, chat)
		}
		b, err := json.Marshal(chats)
		return string(b), err
	}); err != nil {
		return "", fmt.Errorf("订阅GitHub仓库失败: %w", err)
	}
	return fmt.Sprintf("成功订阅仓库 %s 的 %s 事件", a.RepoName, strings.Join(events, ", ")), nil
}

var errNotSubscribed = errors.New("not subscribed")

func unsubscribe(ctx *plugin.Ctx, a RepoArgs) (string, error) {
	err := changeSubs(ctx, func(cs *chatSubs) error {
		if _, ok := cs.Subscriptions[a.RepoName]; !ok {
			return errNotSubscribed
		}
		delete(cs.Subscriptions, a.RepoName)
		return nil
	})
	if errors.Is(err, errNotSubscribed) {
		return "", fmt.Errorf("未找到仓库 %s 的订阅", a.RepoName)
	}
	if err != nil {
		return "", err
	}
	return "成功取消订阅仓库 " + a.RepoName, nil
}

func list(ctx *plugin.Ctx, _ NoArgs) (map[string]SubscriptionView, error) {
	v, found, err := ctx.Store().Get(ctx, plugin.Chat(ctx.ChatKey()), subsKey)
	if err != nil {
		return nil, err
	}
	cs, err := parseSubs(v, found)
	if err != nil {
		return nil, err
	}
	out := map[string]SubscriptionView{}
	for name, s := range cs.Subscriptions {
		out[name] = SubscriptionView{Events: s.Events, CreatedAt: stamp(s.CreatedAt), LastUpdated: stamp(s.LastUpdated)}
	}
	return out, nil
}

func updateEvents(ctx *plugin.Ctx, a UpdateArgs) (string, error) {
	events := normEvents(a.Events)
	err := changeSubs(ctx, func(cs *chatSubs) error {
		s, ok := cs.Subscriptions[a.RepoName]
		if !ok {
			return errNotSubscribed
		}
		s.Events, s.LastUpdated = events, now()
		return nil
	})
	if errors.Is(err, errNotSubscribed) {
		return fmt.Sprintf("未找到仓库 %s 的订阅", a.RepoName), nil
	}
	if err != nil {
		return fmt.Sprintf("更新GitHub仓库订阅事件失败: %v", err), nil
	}
	return fmt.Sprintf("成功更新仓库 %s 的订阅事件为: %s", a.RepoName, strings.Join(events, ", ")), nil
}

// handleWebhook is POST /api/webhook/github, once the server has checked
// the call's signature (or API token).
func handleWebhook(ctx context.Context, body []byte, header http.Header) error {
	event := header.Get("X-GitHub-Event")
	if event == "" {
		return errors.New("no X-GitHub-Event header: not a GitHub webhook call")
	}
	if strings.HasPrefix(header.Get("Content-Type"), "application/x-www-form-urlencoded") {
		form, err := url.ParseQuery(string(body))
		if err != nil {
			return fmt.Errorf("form payload: %w", err)
		}
		body = []byte(form.Get("payload"))
	}
	var payload map[string]any
	if err := json.Unmarshal(body, &payload); err != nil {
		return fmt.Errorf("GitHub %s event: the body is not a JSON object: %w", event, err)
	}
	repo := str(obj(payload, "repository"), "full_name", "unknown/unknown")
	var msg string
	switch event {
	case "push":
		msg = formatPush(repo, payload)
	case "issues":
		msg = formatIssues(repo, payload)
	case "pull_request":
		msg = formatPullRequest(repo, payload)
	case "release":
		msg = formatRelease(repo, payload)
	case "ping":
		p.Logger().Info("GitHub webhook ping: configured", "repo", repo)
		return nil
	default:
		p.Logger().Info("GitHub event not pushed", "event", event, "repo", repo)
		return nil
	}
	return sendToSubscribers(ctx, repo, event, msg)
}

// sendToSubscribers pushes msg to every chat subscribed to repo's event,
// waking the agent there; one chat's failure does not stop the others.
func sendToSubscribers(ctx context.Context, repo, event, msg string) error {
	msg += "\n\n[Attention] This message is visible for you only. Transfer to the chat channel to make other users see it."
	st := p.Store()
	v, found, err := st.Get(ctx, plugin.Global(), chatsKey)
	if err != nil || !found {
		return err
	}
	var chats []string
	if err := json.Unmarshal([]byte(v), &chats); err != nil {
		return fmt.Errorf("subscribed chats: %w", err)
	}
	var errs []error
	sent := 0
	for _, chat := range chats {
		v, found, err := st.Get(ctx, plugin.Chat(chat), subsKey)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		cs, err := parseSubs(v, found)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !cs.subscribed(repo, event) {
			continue
		}
		if err := p.PushSystem(ctx, chat, msg, true); err != nil {
			errs = append(errs, fmt.Errorf("chat %s: %w", chat, err))
			continue
		}
		sent++
	}
	p.Logger().Info("GitHub event pushed", "repo", repo, "event", event, "chats", sent)
	return errors.Join(errs...)
}
