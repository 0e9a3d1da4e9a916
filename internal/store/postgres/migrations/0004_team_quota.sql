-- Each team's quota, the JSON of a sandbox.Quota (keys.go).
ALTER TABLE teams ADD COLUMN quota TEXT NOT NULL DEFAULT '{}';
