package sqlite

import "github.com/nekro-go/nekro/internal/db"

// Component is the name of the KV store's migrations in nekro_migrations.
const Component = "kv"

// Migrations is the KV schema, step by step. Append; never edit a step
// that has shipped.
//
// kv holds one row per value. Its unique index is the logical key
// (plugin, chat, user, key), the constraint the reference lacked. size is
// what the row costs its plugin's quota; kv_usage keeps the per-plugin
// sums, maintained by triggers inside every writing transaction.
// expires_at is Unix milliseconds, 0 for never.
var Migrations = []db.Migration{
	{Version: 1, Name: "create kv and kv_usage", SQL: `
CREATE TABLE kv (
	plugin     TEXT    NOT NULL,
	chat_key   TEXT    NOT NULL,
	user_key   TEXT    NOT NULL,
	store_key  TEXT    NOT NULL,
	value      BLOB    NOT NULL,
	size       INTEGER NOT NULL,
	expires_at INTEGER NOT NULL DEFAULT 0,
	updated_at INTEGER NOT NULL
) STRICT;
CREATE UNIQUE INDEX kv_scope_key ON kv (plugin, chat_key, user_key, store_key);
CREATE INDEX kv_user ON kv (plugin, user_key) WHERE user_key <> '';
CREATE INDEX kv_expiry ON kv (expires_at) WHERE expires_at > 0;

CREATE TABLE kv_usage (
	plugin TEXT    NOT NULL PRIMARY KEY,
	bytes  INTEGER NOT NULL,
	keys   INTEGER NOT NULL
) STRICT;

CREATE TRIGGER kv_usage_insert AFTER INSERT ON kv BEGIN
	INSERT INTO kv_usage (plugin, bytes, keys) VALUES (NEW.plugin, NEW.size, 1)
	ON CONFLICT (plugin) DO UPDATE SET bytes = bytes + excluded.bytes, keys = keys + 1;
END;
CREATE TRIGGER kv_usage_update AFTER UPDATE OF size ON kv WHEN NEW.size <> OLD.size BEGIN
	UPDATE kv_usage SET bytes = bytes + NEW.size - OLD.size WHERE plugin = NEW.plugin;
END;
CREATE TRIGGER kv_usage_delete AFTER DELETE ON kv BEGIN
	UPDATE kv_usage SET bytes = bytes - OLD.size, keys = keys - 1 WHERE plugin = OLD.plugin;
END;
`},
}
