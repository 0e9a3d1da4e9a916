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
