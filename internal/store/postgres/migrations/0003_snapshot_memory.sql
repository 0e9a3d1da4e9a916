-- The agent identity a snapshot's memory image holds, as JSON; 'null' = filesystem only
-- (snapshots.go).
ALTER TABLE snapshots ADD COLUMN memory TEXT NOT NULL DEFAULT 'null';
