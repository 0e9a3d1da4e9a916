-- What the control plane's replicas share besides the records: the answers of calls
-- forwarded to the leader, by the key the forwarding replica gave each (replayed when
-- the same call is sent again to a new leader; kept an hour).
CREATE TABLE call_answers (
    key          TEXT PRIMARY KEY,
    status       INTEGER NOT NULL,
    content_type TEXT NOT NULL,
    body         BYTEA NOT NULL,
    made_at      BIGINT NOT NULL
);
CREATE INDEX call_answers_made_at ON call_answers (made_at);

-- The state dir's files every replica must hold alike (the workload identity's signing keys,
-- the TLS CA, the keys of secrets and volume tokens), sealed with a key derived from the
-- node agents' token: the first replica to start stores its own, the others take them.
CREATE TABLE shared_files (
    name    TEXT PRIMARY KEY,
    sealed  BYTEA NOT NULL,
    made_at BIGINT NOT NULL
);
