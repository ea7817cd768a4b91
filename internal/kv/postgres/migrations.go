package postgres

import "github.com/nekro-go/nekro/internal/db"

// Component is the name of the KV store's migrations in nekro_migrations.
const Component = "kv"

// Migrations is the KV schema, step by step. Append; never edit a step
// that has shipped.
//
// The same tables as the SQLite engine's. Keys are text in the "C"
// collation, so they sort by bytes (as in SQLite) and prefix ranges work
// whatever the database's locale; values are bytea, so any bytes round
// trip (text cannot hold NUL). kv_usage is maintained by statement-level
// triggers: they run once per statement, after it has locked its rows, so
// a DeleteScope never holds the usage row while waiting for a row an Apply
// holds.
var Migrations = []db.Migration{
	{Version: 1, Name: "create kv and kv_usage", SQL: `
CREATE TABLE kv (
	id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	plugin     text COLLATE "C" NOT NULL,
	chat_key   text COLLATE "C" NOT NULL,
	user_key   text COLLATE "C" NOT NULL,
	store_key  text COLLATE "C" NOT NULL,
	value      bytea  NOT NULL,
	size       bigint NOT NULL,
	expires_at bigint NOT NULL DEFAULT 0,
	updated_at bigint NOT NULL
);
CREATE UNIQUE INDEX kv_scope_key ON kv (plugin, chat_key, user_key, store_key);
CREATE INDEX kv_user ON kv (plugin, user_key) WHERE user_key <> '';
CREATE INDEX kv_expiry ON kv (expires_at) WHERE expires_at > 0;

CREATE TABLE kv_usage (
	plugin text COLLATE "C" PRIMARY KEY,
	bytes  bigint NOT NULL,
	keys   bigint NOT NULL
);

CREATE FUNCTION kv_usage_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO kv_usage (plugin, bytes, keys)
		SELECT plugin, sum(size), count(*) FROM kv_new GROUP BY plugin ORDER BY plugin
	ON CONFLICT (plugin) DO UPDATE
		SET bytes = kv_usage.bytes + excluded.bytes, keys = kv_usage.keys + excluded.keys;
	RETURN NULL;
END $$;
CREATE TRIGGER kv_usage_insert AFTER INSERT ON kv
	REFERENCING NEW TABLE AS kv_new FOR EACH STATEMENT EXECUTE FUNCTION kv_usage_insert();

CREATE FUNCTION kv_usage_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	UPDATE kv_usage u SET bytes = u.bytes + d.delta
	FROM (SELECT n.plugin, sum(n.size - o.size) AS delta
	      FROM kv_new n JOIN kv_old o ON o.id = n.id GROUP BY n.plugin) d
	WHERE u.plugin = d.plugin AND d.delta <> 0;
	RETURN NULL;
END $$;
CREATE TRIGGER kv_usage_update AFTER UPDATE ON kv
	REFERENCING OLD TABLE AS kv_old NEW TABLE AS kv_new FOR EACH STATEMENT EXECUTE FUNCTION kv_usage_update();

CREATE FUNCTION kv_usage_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	UPDATE kv_usage u SET bytes = u.bytes - d.bytes, keys = u.keys - d.keys
	FROM (SELECT plugin, sum(size) AS bytes, count(*) AS keys FROM kv_old GROUP BY plugin) d
	WHERE u.plugin = d.plugin;
	RETURN NULL;
END $$;
CREATE TRIGGER kv_usage_delete AFTER DELETE ON kv
	REFERENCING OLD TABLE AS kv_old FOR EACH STATEMENT EXECUTE FUNCTION kv_usage_delete();
`},
}
