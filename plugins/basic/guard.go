package basic

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
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

// guard checks item (a text, or a file's digest) against the chat's recent
// ones under key, as the reference does: an identical one is skipped with
// a note to the AI (an error in strict mode) and clears the list, so a
// deliberate resend goes through; a text very similar to a recent one is
// sent with a note. It records what is sent, keeping the last keep.
func guard(ctx *plugin.Ctx, key, item string, keep int, what string) (send bool, err error) {
	cfg := settings.Get()
	if !cfg.SimilarityMessageFilter {
		return true, nil
	}
	var repeated, similar bool
	_, err = ctx.Store().Update(ctx, plugin.Chat(ctx.ChatKey()), key, func(current string, found bool) (string, error) {
		repeated, similar = false, false
		var recent []string
		if found {
			json.Unmarshal([]byte(current), &recent)
		}
		window := recent[max(0, len(recent)-5):]
		for _, r := range window {
			if r == item {
				repeated = true
				return "[]", nil // the next identical one goes through
			}
		}
		if what == "message" {
			for _, r := range window {
				if similarity(item, r, cfg.SimilarityCheckLength) > cfg.SimilarityThreshold {
					similar = true
					break
				}
			}
		}
		recent = append(recent, item)
		b, err := json.Marshal(recent[max(0, len(recent)-keep):])
		return string(b), err
	})
	if err != nil && !errors.Is(err, plugin.ErrNoService) {
		return false, fmt.Errorf("repeat guard: %w", err)
	}
	switch {
	case repeated && cfg.StrictMessageFilter:
		return false, fmt.Errorf(identicalError, what)
	case repeated:
		return false, ctx.AddSystemMessage(fmt.Sprintf(identicalNote, what, what))
	case similar:
		if err := ctx.AddSystemMessage(similarNote); err != nil {
			return false, err
		}
	}
	return true, nil
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
