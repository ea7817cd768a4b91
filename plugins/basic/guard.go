package basic

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"

	"github.com/nekro-go/nekro/plugin"
)

// KV keys (chat scope) of what the chat was sent recently.
const (
	recentTextsKey = "recent_texts"
	recentFilesKey = "recent_files"
)

// The reference's notes to the AI.
const (
	identicalNote = "System Alert: Identical %s has been sent recently. Auto Skip this %s. Carefully read the recent chat history " +
		"whether it has sent duplicate messages. If you COMPLETELY DETERMINED that it is necessary, resend it. SPAM IS NOT ALLOWED!"
	identicalError = "identical %s has been sent recently: read the recent chat history; if you are COMPLETELY sure it is needed, resend it. SPAM IS NOT ALLOWED"
	similarNote    = "System Alert: You have sent a message that is too similar to a recently sent message! " +
		"You should KEEP YOUR RESPONSE USEFUL and not redundant and cumbersome!"
)

// recentItem is one thing the chat was sent: its digest (to find an
// identical one) and, for texts, its start (to find a similar one).
type recentItem struct {
	Sum  string `json:"h"`
	Text string `json:"t,omitempty"`
}

// guard checks item (a text, or a file's digest) against the chat's last
// five under key, as the reference does: an identical one is skipped with
// a note to the AI (an error in strict mode) and clears the list, so a
// deliberate resend goes through; a text very similar to a recent one
// draws a note. send, when the item may go, sends it; only what was sent
// is remembered (the last keep).
func guard(ctx *plugin.Ctx, key, item string, keep int, what string, send func() error) error {
	cfg := settings.Get()
	if !cfg.SimilarityMessageFilter {
		return send()
	}
	st, scope := ctx.Store(), plugin.Chat(ctx.ChatKey())
	sum := sha256.Sum256([]byte(item))
	entry := recentItem{Sum: hex.EncodeToString(sum[:])}
	if what == "message" {
		entry.Text = string([]rune(item)[:min(len([]rune(item)), 2000)])
	}
	var recent []recentItem
	if raw, found, err := st.Get(ctx, scope, key); err != nil {
		return fmt.Errorf("repeat guard: %w", err)
	} else if found {
		json.Unmarshal([]byte(raw), &recent)
	}
	similar := false
	for _, r := range recent[max(0, len(recent)-5):] {
		if r.Sum == entry.Sum {
			if _, err := st.Set(ctx, scope, key, "[]"); err != nil { // the next identical one goes through
				return fmt.Errorf("repeat guard: %w", err)
			}
			if cfg.StrictMessageFilter {
				return fmt.Errorf(identicalError, what)
			}
			return ctx.PushSystem(fmt.Sprintf(identicalNote, what, what), false)
		}
		if what == "message" && similarity(entry.Text, r.Text, cfg.SimilarityCheckLength) > cfg.SimilarityThreshold {
			similar = true
		}
	}
	if err := send(); err != nil {
		return err
	}
	if similar {
		if err := ctx.PushSystem(similarNote, false); err != nil {
			return err
		}
	}
	_, err := st.Update(ctx, scope, key, func(current string, found bool) (string, error) {
		var recent []recentItem
		if found {
			json.Unmarshal([]byte(current), &recent)
		}
		recent = append(recent, entry)
		b, err := json.Marshal(recent[max(0, len(recent)-keep):])
		return string(b), err
	})
	if err != nil {
		return fmt.Errorf("repeat guard: %w", err)
	}
	return nil
}

// similarity is difflib's ratio in spirit: twice the longest common
// subsequence over the total length, 0 when either text is shorter than
// minLength. Texts are compared on their first 2000 characters.
func similarity(a, b string, minLength int) float64 {
	ra, rb := []rune(a), []rune(b)
	if len(ra) < minLength || len(rb) < minLength {
		return 0
	}
	ra, rb = ra[:min(len(ra), 2000)], rb[:min(len(rb), 2000)]
	prev, cur := make([]int, len(rb)+1), make([]int, len(rb)+1)
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			switch {
			case ra[i-1] == rb[j-1]:
				cur[j] = prev[j-1] + 1
			case prev[j] > cur[j-1]:
				cur[j] = prev[j]
			default:
				cur[j] = cur[j-1]
			}
		}
		prev, cur = cur, prev
	}
	return 2 * float64(prev[len(rb)]) / float64(len(ra)+len(rb))
}

// fileSum is the SHA-256 of a sandbox file.
func fileSum(ctx *plugin.Ctx, path string) (string, error) {
	f, err := ctx.FS().Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
