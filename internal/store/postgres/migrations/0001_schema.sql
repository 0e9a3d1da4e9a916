-- Warren's schema as of SQLite migration 9: the same tables and columns,
-- times in Unix nanoseconds, records as JSON text beside the columns
-- queries filter on (a new field needs no migration).
CREATE TABLE teams (
	id TEXT PRIMARY KEY,
	name TEXT NOT NULL,
	created_at BIGINT NOT NULL
);
CREATE TABLE api_keys (
	id TEXT PRIMARY KEY,
	team_id TEXT NOT NULL REFERENCES teams(id),
	name TEXT NOT NULL,
	hash TEXT NOT NULL UNIQUE,
	mask TEXT NOT NULL,
	created_at BIGINT NOT NULL
);
CREATE TABLE sandboxes (
	id TEXT PRIMARY KEY,
	team_id TEXT NOT NULL,
	state TEXT NOT NULL,
	started_at BIGINT NOT NULL,
	data TEXT NOT NULL
);
CREATE INDEX sandboxes_team_state ON sandboxes(team_id, state);
CREATE TABLE snapshots (
	id TEXT PRIMARY KEY,
	team_id TEXT NOT NULL,
	sandbox_id TEXT NOT NULL,
	name TEXT NOT NULL,
	image TEXT NOT NULL,
	created_at BIGINT NOT NULL,
	agent_args TEXT NOT NULL DEFAULT 'null'
);
CREATE TABLE sandbox_logs (
	seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	sandbox_id TEXT NOT NULL,
	ts BIGINT NOT NULL,
	level TEXT NOT NULL,
	message TEXT NOT NULL,
	fields TEXT NOT NULL
);
CREATE INDEX sandbox_logs_ts ON sandbox_logs(sandbox_id, ts);
CREATE TABLE sandbox_metrics (
	seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	sandbox_id TEXT NOT NULL,
	ts BIGINT NOT NULL,
	data TEXT NOT NULL
);
CREATE INDEX sandbox_metrics_ts ON sandbox_metrics(sandbox_id, ts);

CREATE TABLE templates (
	id TEXT PRIMARY KEY,
	team_id TEXT NOT NULL,
	created_at BIGINT NOT NULL,
	data TEXT NOT NULL
);
CREATE TABLE template_names (
	name TEXT PRIMARY KEY,
	template_id TEXT NOT NULL
);
CREATE INDEX template_names_template ON template_names(template_id);
CREATE TABLE template_builds (
	id TEXT PRIMARY KEY,
	template_id TEXT NOT NULL,
	status TEXT NOT NULL,
	created_at BIGINT NOT NULL,
	data TEXT NOT NULL
);
CREATE INDEX template_builds_template ON template_builds(template_id, created_at);
CREATE INDEX template_builds_status ON template_builds(status);
CREATE TABLE template_tags (
	template_id TEXT NOT NULL,
	tag TEXT NOT NULL,
	build_id TEXT NOT NULL,
	created_at BIGINT NOT NULL,
	PRIMARY KEY (template_id, tag)
);
CREATE TABLE template_build_logs (
	seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	build_id TEXT NOT NULL,
	ts BIGINT NOT NULL,
	level TEXT NOT NULL,
	message TEXT NOT NULL,
	step TEXT NOT NULL
);
CREATE INDEX template_build_logs_build ON template_build_logs(build_id, seq);

CREATE TABLE sandbox_events (
	seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	id TEXT NOT NULL UNIQUE,
	team_id TEXT NOT NULL,
	sandbox_id TEXT NOT NULL,
	ts BIGINT NOT NULL,
	data TEXT NOT NULL
);
CREATE INDEX sandbox_events_team ON sandbox_events(team_id, seq);
CREATE INDEX sandbox_events_sandbox ON sandbox_events(team_id, sandbox_id, seq);
CREATE INDEX sandbox_events_ts ON sandbox_events(ts);
CREATE TABLE webhooks (
	id TEXT PRIMARY KEY,
	team_id TEXT NOT NULL,
	created_at BIGINT NOT NULL,
	data TEXT NOT NULL
);
CREATE INDEX webhooks_team ON webhooks(team_id, created_at);
CREATE TABLE webhook_deliveries (
	seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	id TEXT NOT NULL UNIQUE,
	webhook_id TEXT NOT NULL,
	event_id TEXT NOT NULL,
	sandbox_id TEXT NOT NULL,
	status TEXT NOT NULL,
	next_attempt BIGINT NOT NULL,
	data TEXT NOT NULL
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries(status, next_attempt);
CREATE INDEX webhook_deliveries_order ON webhook_deliveries(webhook_id, sandbox_id, status, seq);
CREATE INDEX webhook_deliveries_event ON webhook_deliveries(event_id);

CREATE TABLE dashboard_logins (
	hash TEXT PRIMARY KEY,
	team_id TEXT NOT NULL REFERENCES teams(id) ON DELETE CASCADE,
	expires_at BIGINT NOT NULL
);
CREATE TABLE dashboard_sessions (
	hash TEXT PRIMARY KEY,
	team_id TEXT NOT NULL REFERENCES teams(id) ON DELETE CASCADE,
	csrf TEXT NOT NULL,
	created_at BIGINT NOT NULL,
	expires_at BIGINT NOT NULL
);

CREATE TABLE volumes (
	id TEXT PRIMARY KEY,
	team_id TEXT NOT NULL,
	name TEXT NOT NULL,
	created_at BIGINT NOT NULL,
	CONSTRAINT volumes_team_name UNIQUE (team_id, name)
);
CREATE TABLE secrets (
	id TEXT PRIMARY KEY,
	team_id TEXT NOT NULL,
	name TEXT NOT NULL,
	version BIGINT NOT NULL,
	metadata TEXT NOT NULL,
	created_at BIGINT NOT NULL,
	updated_at BIGINT NOT NULL,
	sealed BYTEA NOT NULL,
	CONSTRAINT secrets_team_name UNIQUE (team_id, name)
);
CREATE TABLE pool_demand (
	template_id TEXT PRIMARY KEY,
	team_id TEXT NOT NULL,
	peaks TEXT NOT NULL
);
