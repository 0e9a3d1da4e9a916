-- Whether a dashboard session is the operator's: made from a login link of `warren dashboard`,
-- it sees the server-wide figures (dashboard.go).
ALTER TABLE dashboard_sessions ADD COLUMN operator BOOLEAN NOT NULL DEFAULT FALSE;
