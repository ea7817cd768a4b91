package llm

import "testing"

// Model groups come from NEKRO_LLM_<GROUP>_MODEL; the chat endpoint's key
// goes only to the chat endpoint.
func TestGroupsFromEnv(t *testing.T) {
	chat := Config{BaseURL: "https://chat.example/v1", APIKey: "chat-key", Model: "big"}
	t.Setenv("NEKRO_LLM_VISION_MODEL", "eyes")
	t.Setenv("NEKRO_LLM_DRAW_MODEL", "brush")
	t.Setenv("NEKRO_LLM_DRAW_BASE_URL", "https://draw.example/v1")
	g := GroupsFromEnv(chat)
	if v := g["vision"]; v.Model != "eyes" || v.BaseURL != chat.BaseURL || v.APIKey != "chat-key" {
		t.Errorf("vision: %+v", v)
	}
	if d := g["draw"]; d.Model != "brush" || d.BaseURL != "https://draw.example/v1" || d.APIKey != "" {
		t.Errorf("draw (another endpoint must not get chat's key): %+v", d)
	}
	if len(g) != 2 {
		t.Errorf("groups %v", g)
	}
}
