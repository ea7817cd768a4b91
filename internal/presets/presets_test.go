package presets_test

import (
	"context"
	"errors"
	"testing"

	"github.com/nekro-go/nekro/internal/kv/kvtest"
	"github.com/nekro-go/nekro/internal/presets"
)

// Presets on both databases: created with an id, a default, a chat's own
// choice that wins over the default and no other chat's, a deletion that
// sends choosing chats back, and the reference's format both ways.
func TestPresetsAndChoices(t *testing.T) {
	ctx := context.Background()
	for _, kind := range []string{"sqlite", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			open := kvtest.DatabaseOpener(t, kind)
			s, err := presets.Open(ctx, open())
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if _, ok, err := s.ForChat(ctx, "web_a"); ok || err != nil {
				t.Fatalf("no presets yet: %v %v", ok, err)
			}
			cat, err := s.Create(ctx, presets.Preset{Name: "Cat", Content: "You are a cat.", Tags: []string{"animal", " cute "}, Default: true})
			if err != nil || cat.ID == 0 || !cat.Default || cat.Lang != "en" || len(cat.Tags) != 2 || cat.Tags[1] != "cute" {
				t.Fatalf("create: %+v %v", cat, err)
			}
			fox, err := s.Create(ctx, presets.Preset{Name: "Fox", Content: "你是一只狐狸。", Lang: "zh"})
			if err != nil || fox.ID == cat.ID || fox.Default {
				t.Fatalf("create: %+v %v", fox, err)
			}
			if err := s.Choose(ctx, "web_a", fox.ID); err != nil {
				t.Fatal(err)
			}
			// Another process on the same database sees the choices.
			other, err := presets.Open(ctx, open())
			if err != nil {
				t.Fatal(err)
			}
			defer other.Close()
			if p, ok, err := other.ForChat(ctx, "web_a"); !ok || err != nil || p.ID != fox.ID {
				t.Errorf("web_a: %+v %v %v", p, ok, err)
			}
			if p, ok, err := other.ForChat(ctx, "web_b"); !ok || err != nil || p.ID != cat.ID {
				t.Errorf("web_b (default): %+v %v %v", p, ok, err)
			}
			if err := s.Choose(ctx, "web_b", 999); !errors.Is(err, presets.ErrNotFound) {
				t.Errorf("choosing a missing preset: %v", err)
			}
			if _, err := s.Update(ctx, fox.ID, presets.Preset{Name: "Fox", Content: "A fox.", Lang: "fr"}); err == nil {
				t.Error("an unknown language was taken")
			}
			if err := s.Delete(ctx, fox.ID); err != nil {
				t.Fatal(err)
			}
			if p, _, _ := s.ForChat(ctx, "web_a"); p.ID != cat.ID {
				t.Errorf("after deleting its choice, web_a has %+v, want the default", p)
			}
			ref := presets.Export(cat)
			if ref.Tags != "animal,cute" || ref.Title != "Cat" {
				t.Errorf("export: %+v", ref)
			}
			back := presets.Import(ref)
			if back.Name != "Cat" || back.Content != cat.Content || len(back.Tags) != 2 || back.Lang != "en" {
				t.Errorf("import: %+v", back)
			}
			list, err := s.List(ctx)
			if err != nil || len(list) != 1 {
				t.Errorf("list: %+v %v", list, err)
			}
		})
	}
}
