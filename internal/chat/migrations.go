package chat

import "github.com/nekro-go/nekro/internal/db"

// component names the chat tables in nekro_migrations.
const component = "chat"

// The two lists stay in step: version n of one is version n of the other,
// spelled in each database's dialect. Times are Unix microseconds.

var sqliteMigrations = []db.Migration{{
	Version: 1, Name: "create chats, messages, turns and runs",
	SQL: `
CREATE TABLE chat_messages (
	id          INTEGER PRIMARY KEY AUTOINCREMENT,
	chat_key    TEXT    NOT NULL,
	role        TEXT    NOT NULL,
	sender_id   TEXT    NOT NULL,
	sender_name TEXT    NOT NULL,
	text        TEXT    NOT NULL,
	attachments TEXT    NOT NULL,
	turn_id     INTEGER,
	created_at  INTEGER NOT NULL
) STRICT;
CREATE INDEX chat_messages_by_chat ON chat_messages (chat_key, id);
CREATE INDEX chat_messages_waiting ON chat_messages (chat_key, id) WHERE role = 'user' AND turn_id IS NULL;
CREATE TABLE chat_turns (
	id          INTEGER PRIMARY KEY AUTOINCREMENT,
	chat_key    TEXT    NOT NULL,
	status      TEXT    NOT NULL,
	error       TEXT    NOT NULL,
	iterations  INTEGER NOT NULL,
	requests    INTEGER NOT NULL,
	model_us    INTEGER NOT NULL,
	started_at  INTEGER NOT NULL,
	finished_at INTEGER NOT NULL
) STRICT;
CREATE INDEX chat_turns_by_chat ON chat_turns (chat_key, id);
CREATE TABLE chat_runs (
	run_id       TEXT    PRIMARY KEY,
	chat_key     TEXT    NOT NULL,
	turn_id      INTEGER NOT NULL,
	iteration    INTEGER NOT NULL,
	code         TEXT    NOT NULL,
	output       TEXT    NOT NULL,
	stop_type    TEXT    NOT NULL,
	exit_code    INTEGER NOT NULL,
	duration_ms  INTEGER NOT NULL,
	calls        TEXT    NOT NULL,
	note         TEXT    NOT NULL,
	agent_method TEXT    NOT NULL,
	agent_result TEXT    NOT NULL,
	created_at   INTEGER NOT NULL
) STRICT;
CREATE INDEX chat_runs_by_chat ON chat_runs (chat_key, created_at);
`,
}, {
	Version: 2, Name: "system messages wait for a turn only when they wake one",
	SQL: `
UPDATE chat_messages SET turn_id = -1 WHERE role = 'system' AND turn_id IS NULL;
CREATE INDEX chat_messages_waking ON chat_messages (chat_key, id) WHERE role = 'system' AND turn_id IS NULL;
`,
}, {
	Version: 3, Name: "turn leases: an owner per running turn, one running turn per chat, claims counted",
	SQL: `
UPDATE chat_turns SET status = 'interrupted', error = 'the host stopped during the turn', finished_at = CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER)
	WHERE status = 'running' AND id NOT IN (SELECT MAX(id) FROM chat_turns WHERE status = 'running' GROUP BY chat_key);
ALTER TABLE chat_turns ADD COLUMN owner TEXT NOT NULL DEFAULT '';
ALTER TABLE chat_turns ADD COLUMN lease_until INTEGER NOT NULL DEFAULT 0;
ALTER TABLE chat_messages ADD COLUMN claims INTEGER NOT NULL DEFAULT 0;
UPDATE chat_messages SET claims = 1 WHERE role = 'user' AND turn_id IN (SELECT id FROM chat_turns WHERE status = 'running');
CREATE UNIQUE INDEX chat_turns_running ON chat_turns (chat_key) WHERE status = 'running';
`,
}, {
	Version: 4, Name: "attachments in the database, for replicas",
	SQL: `
CREATE TABLE chat_files (
	chat_key   TEXT NOT NULL,
	name       TEXT NOT NULL,
	size       INTEGER NOT NULL,
	created_at INTEGER NOT NULL,
	PRIMARY KEY (chat_key, name)
) STRICT;
CREATE TABLE chat_file_chunks (
	chat_key TEXT NOT NULL,
	name     TEXT NOT NULL,
	seq      INTEGER NOT NULL,
	data     BLOB NOT NULL,
	PRIMARY KEY (chat_key, name, seq)
) STRICT;
`,
}, {
	Version: 5, Name: "the run log: runs and turns by time across chats",
	SQL: `
CREATE INDEX chat_runs_by_time ON chat_runs (created_at, run_id);
CREATE INDEX chat_turns_by_time ON chat_turns (started_at);
`,
}, {
	Version: 6, Name: "the model group that answered each turn and whose code each run ran",
	SQL: `
ALTER TABLE chat_turns ADD COLUMN model_group TEXT NOT NULL DEFAULT '';
ALTER TABLE chat_runs ADD COLUMN model_group TEXT NOT NULL DEFAULT '';
`,
}, {
	Version: 7, Name: "context that fits the model: history summaries, and how each turn's prompt fit",
	SQL: `
CREATE TABLE chat_summaries (
	chat_key    TEXT    PRIMARY KEY,
	through_id  INTEGER NOT NULL,
	covered     INTEGER NOT NULL,
	text        TEXT    NOT NULL,
	tokens      INTEGER NOT NULL,
	model_group TEXT    NOT NULL,
	updated_at  INTEGER NOT NULL
) STRICT;
ALTER TABLE chat_turns ADD COLUMN prompt_context TEXT NOT NULL DEFAULT '';
ALTER TABLE chat_runs ADD COLUMN prompt_context TEXT NOT NULL DEFAULT '';
`,
}, {
	Version: 8, Name: "the outbox: assistant messages of platform chats until the replica holding the platform sends them",
	SQL: `
CREATE TABLE chat_outbox (
	message_id  INTEGER PRIMARY KEY,
	chat_key    TEXT    NOT NULL,
	platform    TEXT    NOT NULL,
	attempts    INTEGER NOT NULL,
	next_at     INTEGER NOT NULL,
	owner       TEXT    NOT NULL,
	lease_until INTEGER NOT NULL,
	created_at  INTEGER NOT NULL,
	last_error  TEXT    NOT NULL
) STRICT;
CREATE INDEX chat_outbox_by_platform ON chat_outbox (platform, message_id);
CREATE INDEX chat_outbox_by_chat ON chat_outbox (chat_key, message_id);
`,
}}

var postgresMigrations = []db.Migration{{
	Version: 1, Name: "create chats, messages, turns and runs",
	SQL: `
CREATE TABLE chat_messages (
	id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	chat_key    text   NOT NULL,
	role        text   NOT NULL,
	sender_id   text   NOT NULL,
	sender_name text   NOT NULL,
	text        text   NOT NULL,
	attachments text   NOT NULL,
	turn_id     bigint,
	created_at  bigint NOT NULL
);
CREATE INDEX chat_messages_by_chat ON chat_messages (chat_key, id);
CREATE INDEX chat_messages_waiting ON chat_messages (chat_key, id) WHERE role = 'user' AND turn_id IS NULL;
CREATE TABLE chat_turns (
	id          bigint  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	chat_key    text    NOT NULL,
	status      text    NOT NULL,
	error       text    NOT NULL,
	iterations  integer NOT NULL,
	requests    integer NOT NULL,
	model_us    bigint  NOT NULL,
	started_at  bigint  NOT NULL,
	finished_at bigint  NOT NULL
);
CREATE INDEX chat_turns_by_chat ON chat_turns (chat_key, id);
CREATE TABLE chat_runs (
	run_id       text    PRIMARY KEY,
	chat_key     text    NOT NULL,
	turn_id      bigint  NOT NULL,
	iteration    integer NOT NULL,
	code         text    NOT NULL,
	output       text    NOT NULL,
	stop_type    text    NOT NULL,
	exit_code    integer NOT NULL,
	duration_ms  bigint  NOT NULL,
	calls        text    NOT NULL,
	note         text    NOT NULL,
	agent_method text    NOT NULL,
	agent_result text    NOT NULL,
	created_at   bigint  NOT NULL
);
CREATE INDEX chat_runs_by_chat ON chat_runs (chat_key, created_at);
`,
}, {
	Version: 2, Name: "system messages wait for a turn only when they wake one",
	SQL: `
UPDATE chat_messages SET turn_id = -1 WHERE role = 'system' AND turn_id IS NULL;
CREATE INDEX chat_messages_waking ON chat_messages (chat_key, id) WHERE role = 'system' AND turn_id IS NULL;
`,
}, {
	Version: 3, Name: "turn leases: an owner per running turn, one running turn per chat, claims counted",
	SQL: `
UPDATE chat_turns SET status = 'interrupted', error = 'the host stopped during the turn', finished_at = (EXTRACT(EPOCH FROM clock_timestamp()) * 1000000)::bigint
	WHERE status = 'running' AND id NOT IN (SELECT MAX(id) FROM chat_turns WHERE status = 'running' GROUP BY chat_key);
ALTER TABLE chat_turns ADD COLUMN owner text NOT NULL DEFAULT '';
ALTER TABLE chat_turns ADD COLUMN lease_until bigint NOT NULL DEFAULT 0;
ALTER TABLE chat_messages ADD COLUMN claims integer NOT NULL DEFAULT 0;
UPDATE chat_messages SET claims = 1 WHERE role = 'user' AND turn_id IN (SELECT id FROM chat_turns WHERE status = 'running');
CREATE UNIQUE INDEX chat_turns_running ON chat_turns (chat_key) WHERE status = 'running';
`,
}, {
	Version: 4, Name: "attachments in the database, for replicas",
	SQL: `
CREATE TABLE chat_files (
	chat_key   text NOT NULL,
	name       text NOT NULL,
	size       bigint NOT NULL,
	created_at bigint NOT NULL,
	PRIMARY KEY (chat_key, name)
);
CREATE TABLE chat_file_chunks (
	chat_key text NOT NULL,
	name     text NOT NULL,
	seq      bigint NOT NULL,
	data     bytea NOT NULL,
	PRIMARY KEY (chat_key, name, seq)
);
`,
}, {
	Version: 5, Name: "the run log: runs and turns by time across chats",
	SQL: `
CREATE INDEX chat_runs_by_time ON chat_runs (created_at, run_id);
CREATE INDEX chat_turns_by_time ON chat_turns (started_at);
`,
}, {
	Version: 6, Name: "the model group that answered each turn and whose code each run ran",
	SQL: `
ALTER TABLE chat_turns ADD COLUMN model_group text NOT NULL DEFAULT '';
ALTER TABLE chat_runs ADD COLUMN model_group text NOT NULL DEFAULT '';
`,
}, {
	Version: 7, Name: "context that fits the model: history summaries, and how each turn's prompt fit",
	SQL: `
CREATE TABLE chat_summaries (
	chat_key    text   PRIMARY KEY,
	through_id  bigint NOT NULL,
	covered     bigint NOT NULL,
	text        text   NOT NULL,
	tokens      bigint NOT NULL,
	model_group text   NOT NULL,
	updated_at  bigint NOT NULL
);
ALTER TABLE chat_turns ADD COLUMN prompt_context text NOT NULL DEFAULT '';
ALTER TABLE chat_runs ADD COLUMN prompt_context text NOT NULL DEFAULT '';
`,
}, {
	Version: 8, Name: "the outbox: assistant messages of platform chats until the replica holding the platform sends them",
	SQL: `
CREATE TABLE chat_outbox (
	message_id  bigint  PRIMARY KEY,
	chat_key    text    NOT NULL,
	platform    text    NOT NULL,
	attempts    bigint  NOT NULL,
	next_at     bigint  NOT NULL,
	owner       text    NOT NULL,
	lease_until bigint  NOT NULL,
	created_at  bigint  NOT NULL,
	last_error  text    NOT NULL
);
CREATE INDEX chat_outbox_by_platform ON chat_outbox (platform, message_id);
CREATE INDEX chat_outbox_by_chat ON chat_outbox (chat_key, message_id);
`,
}}
