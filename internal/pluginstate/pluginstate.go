// Package pluginstate keeps which plugins the operator turned off, in the
// database, so the choice survives restarts and every nekro process on
// the same database (nekro serve, nekro exec, replicas sharing
// PostgreSQL) agrees on it. A plugin without a row is on: a newly
// installed plugin is enabled until the operator says otherwise.
package pluginstate

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/nekro-go/nekro/internal/db"
)

const component = "plugin_state"

// One migration list serves both databases: the SQL is the same.
var migrations = []db.Migration{{
	Version: 1, Name: "create plugin_state",
	SQL: `CREATE TABLE plugin_state (
	plugin_key TEXT    NOT NULL PRIMARY KEY,
	enabled    INTEGER NOT NULL,
	updated_at BIGINT  NOT NULL
)`,
}}

// Store reads and writes the operator's choices.
type Store struct {
	db    *sql.DB
	close func() error
}

// Open migrates the table on h.
func Open(ctx context.Context, h db.Handle) (*Store, error) {
	w, closeFn, err := db.Writer(ctx, h, component, migrations)
	if err != nil {
		return nil, fmt.Errorf("plugin state: %w", err)
	}
	return &Store{db: w, close: closeFn}, nil
}

// Close releases the store's own handle; the database stays open.
func (s *Store) Close() error { return s.close() }

// Set records whether the plugin with key is enabled.
func (s *Store) Set(ctx context.Context, key string, enabled bool) error {
	on := 0
	if enabled {
		on = 1
	}
	_, err := s.db.ExecContext(ctx, `INSERT INTO plugin_state (plugin_key, enabled, updated_at) VALUES ($1, $2, $3)
		ON CONFLICT (plugin_key) DO UPDATE SET enabled = excluded.enabled, updated_at = excluded.updated_at`,
		key, on, time.Now().UnixMilli())
	if err != nil {
		return fmt.Errorf("plugin state of %s: %w", key, err)
	}
	return nil
}

// Disabled returns the keys of the plugins the operator turned off.
func (s *Store) Disabled(ctx context.Context) (map[string]bool, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT plugin_key FROM plugin_state WHERE enabled = 0`)
	if err != nil {
		return nil, fmt.Errorf("plugin state: %w", err)
	}
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			return nil, fmt.Errorf("plugin state: %w", err)
		}
		out[k] = true
	}
	return out, rows.Err()
}
