// Package db opens nekro's database, embedded SQLite or PostgreSQL, and
// applies versioned schema migrations to it.
//
// Every component that keeps tables (the KV store today; chats, messages
// and runs later) owns an ordered list of Migrations under its own name.
// The list only grows: a released migration is never edited or removed,
// and a change of schema is a new migration with the next version. The
// table nekro_migrations records, per component, which versions ran, so
// components migrate independently in one database:
//
//	var kvMigrations = []db.Migration{
//		{Version: 1, Name: "create kv", SQL: `CREATE TABLE kv (...)`},
//	}
//	err := db.MigrateSQLite(ctx, d, "kv", kvMigrations)
//
// Migrations run in one transaction under a lock (SQLite's write lock,
// PostgreSQL's advisory lock), so two processes opening the same database
// at once apply each step exactly once. A database whose recorded version
// is newer than the binary's list, or whose recorded step names differ,
// is refused rather than guessed at.
package db

import (
	"fmt"
	"time"
)

// Migration is one step of a component's schema.
type Migration struct {
	// Version orders the steps: 1, 2, 3, ... without gaps.
	Version int
	// Name says what the step does; it is recorded and checked on open.
	Name string
	// SQL holds one or more statements, run in one transaction.
	SQL string
}

// checkList verifies that ms is numbered 1..n in order.
func checkList(component string, ms []Migration) error {
	if component == "" {
		return fmt.Errorf("migrations: empty component name")
	}
	for i, m := range ms {
		if m.Version != i+1 {
			return fmt.Errorf("migrations of %s: step %d has version %d, want %d", component, i, m.Version, i+1)
		}
		if m.Name == "" || m.SQL == "" {
			return fmt.Errorf("migrations of %s: version %d has no name or no SQL", component, m.Version)
		}
	}
	return nil
}

// applied is one row of nekro_migrations.
type applied struct {
	version int
	name    string
}

// pending checks the recorded history against ms and returns the steps
// still to run.
func pending(component string, ms []Migration, done []applied) ([]Migration, error) {
	for i, a := range done {
		if a.version != i+1 {
			return nil, fmt.Errorf("migrations of %s: recorded versions have a gap at %d", component, i+1)
		}
		if a.version > len(ms) {
			return nil, fmt.Errorf("migrations of %s: the database is at version %d, newer than this binary's %d (upgrade nekro)",
				component, done[len(done)-1].version, len(ms))
		}
		if ms[i].Name != a.name {
			return nil, fmt.Errorf("migrations of %s: version %d is recorded as %q but this binary calls it %q",
				component, a.version, a.name, ms[i].Name)
		}
	}
	return ms[len(done):], nil
}

func nowText() string { return time.Now().UTC().Format(time.RFC3339Nano) }
