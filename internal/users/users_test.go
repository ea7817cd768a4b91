package users_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/nekro-go/nekro/internal/kv/kvtest"
	"github.com/nekro-go/nekro/internal/users"
)

// eachDatabase runs f against two stores on one fresh database (two
// nekro processes sharing it), SQLite always and PostgreSQL when
// NEKRO_TEST_DATABASE_URL is set (required in CI).
func eachDatabase(t *testing.T, f func(t *testing.T, a, b *users.Store)) {
	ctx := context.Background()
	for _, kind := range []string{"sqlite", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			open := kvtest.DatabaseOpener(t, kind)
			var st [2]*users.Store
			for i := range st {
				s, err := users.Open(ctx, open())
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { s.Close() })
				st[i] = s
			}
			f(t, st[0], st[1])
		})
	}
}

// Tokens: shown once, 256 bits, kept only as a hash; a second token
// works beside the first; removing the user revokes both at once, in the
// other process too.
func TestTokens(t *testing.T) {
	ctx := context.Background()
	eachDatabase(t, func(t *testing.T, a, b *users.Store) {
		u, tok, err := a.Add(ctx, "alice", "Alice")
		if err != nil || u.Name != "Alice" {
			t.Fatalf("add: %+v %v", u, err)
		}
		if !strings.HasPrefix(tok, users.TokenPrefix) || len(tok) != len(users.TokenPrefix)+43 {
			t.Errorf("token %q: want the prefix and 32 bytes in base64url", tok)
		}
		if _, _, err := b.Add(ctx, "alice", ""); !errors.Is(err, users.ErrExists) {
			t.Errorf("second add: %v", err)
		}
		tok2, err := b.NewToken(ctx, "alice")
		if err != nil || tok2 == tok {
			t.Fatalf("new token: %v", err)
		}
		for _, tk := range []string{tok, tok2} {
			if id, err := b.Resolve(ctx, tk); err != nil || id != "alice" {
				t.Errorf("resolve: %q %v", id, err)
			}
		}
		for _, bad := range []string{"", "nope", users.TokenPrefix, tok + "x", users.HashToken(tok)} {
			if _, err := a.Resolve(ctx, bad); !errors.Is(err, users.ErrNotFound) {
				t.Errorf("resolve %q: %v", bad, err)
			}
		}
		if _, err := a.NewToken(ctx, "bob"); !errors.Is(err, users.ErrNotFound) {
			t.Errorf("token for nobody: %v", err)
		}
		list, err := b.List(ctx)
		if err != nil || len(list) != 1 || list[0].Tokens != 2 {
			t.Errorf("list: %+v %v", list, err)
		}
		if err := a.Remove(ctx, "alice"); err != nil {
			t.Fatal(err)
		}
		for _, tk := range []string{tok, tok2} {
			if _, err := b.Resolve(ctx, tk); !errors.Is(err, users.ErrNotFound) {
				t.Errorf("a removed user's token still resolves: %v", err)
			}
		}
		if err := a.Remove(ctx, "alice"); !errors.Is(err, users.ErrNotFound) {
			t.Errorf("remove twice: %v", err)
		}
	})
}

// Membership: the first poster to an empty chat owns it; others are not
// members until the operator adds them; a removed user leaves its chats;
// of many users claiming one empty chat at once, exactly one wins.
func TestMembership(t *testing.T) {
	ctx := context.Background()
	eachDatabase(t, func(t *testing.T, a, b *users.Store) {
		for _, id := range []string{"alice", "bob"} {
			if _, _, err := a.Add(ctx, id, ""); err != nil {
				t.Fatal(err)
			}
		}
		if ok, err := a.Claim(ctx, "c1", "alice"); !ok || err != nil {
			t.Fatalf("alice claims c1: %v %v", ok, err)
		}
		if ok, err := b.Claim(ctx, "c1", "bob"); ok || err != nil {
			t.Errorf("bob claims alice's chat: %v %v", ok, err)
		}
		if ok, _ := b.IsMember(ctx, "c1", "bob"); ok {
			t.Error("bob is a member")
		}
		if err := b.AddMember(ctx, "c1", "bob"); err != nil {
			t.Fatal(err)
		}
		if err := b.AddMember(ctx, "c1", "bob"); err != nil {
			t.Errorf("adding twice: %v", err)
		}
		if err := b.AddMember(ctx, "c1", "carol"); !errors.Is(err, users.ErrNotFound) {
			t.Errorf("adding nobody: %v", err)
		}
		if m, _ := a.Members(ctx, "c1"); strings.Join(m, ",") != "alice,bob" {
			t.Errorf("members: %v", m)
		}
		if ok, err := b.Claim(ctx, "c1", "bob"); !ok || err != nil {
			t.Errorf("a member posts: %v %v", ok, err)
		}
		if err := a.Remove(ctx, "alice"); err != nil {
			t.Fatal(err)
		}
		if m, _ := b.Members(ctx, "c1"); strings.Join(m, ",") != "bob" {
			t.Errorf("members after alice left: %v", m)
		}
		if was, err := a.RemoveMember(ctx, "c1", "bob"); !was || err != nil {
			t.Errorf("remove member: %v %v", was, err)
		}
		if c, _ := b.Chats(ctx, "bob"); len(c) != 0 {
			t.Errorf("bob's chats: %v", c)
		}

		// Ten users race for one empty chat.
		var ids []string
		for i := range 10 {
			id := "racer" + string(rune('a'+i))
			if _, _, err := a.Add(ctx, id, ""); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
		var wg sync.WaitGroup
		won := make(chan string, len(ids))
		for i, id := range ids {
			st := []*users.Store{a, b}[i%2]
			wg.Go(func() {
				if ok, err := st.Claim(ctx, "race", id); err != nil {
					t.Error(err)
				} else if ok {
					won <- id
				}
			})
		}
		wg.Wait()
		close(won)
		var winners []string
		for id := range won {
			winners = append(winners, id)
		}
		if m, _ := a.Members(ctx, "race"); len(winners) != 1 || len(m) != 1 || m[0] != winners[0] {
			t.Errorf("winners %v, members %v: want exactly one", winners, m)
		}
	})
}
