-- Sluice's PostgreSQL schema, version 8: the event store (sluice-core's `events` rules,
-- applied in src/events/ under the locks described there).

-- The one counter of global positions: `next_position` is the position the next event gets.
-- An append takes its positions from this row with UPDATE ... RETURNING and holds the row lock
-- until it commits, so appends commit one after another in position order: a reader never sees
-- a position before every position below it is committed, and a rolled-back append gives its
-- positions back (nothing is skipped). The lock is the last one an append takes.
CREATE TABLE event_positions (
    id            smallint PRIMARY KEY CHECK (id = 1),
    next_position bigint NOT NULL
);
INSERT INTO event_positions (id, next_position) VALUES (1, 0);

-- One row per stream ever written: its state as core keeps it (`StreamState`): the next
-- version, the first visible one (above 0 after a soft delete), and the status (0 live, 1
-- soft-deleted, 2 hard-deleted). An append locks its stream's row first (FOR UPDATE), so the
-- versions of one stream are decided one append at a time on every node.
CREATE TABLE event_streams (
    stream_id    text COLLATE "C" PRIMARY KEY,
    next_version bigint NOT NULL,
    visible_from bigint NOT NULL DEFAULT 0,
    status       smallint NOT NULL DEFAULT 0
);

-- Every event, by position. (stream_id, version) names one event forever; the event id
-- index finds a retried append; the type and correlation indexes serve filtered reads of $all.
CREATE TABLE events (
    position       bigint PRIMARY KEY,
    stream_id      text COLLATE "C" NOT NULL,
    version        bigint NOT NULL,
    event_id       text COLLATE "C" NOT NULL,
    event_type     text COLLATE "C" NOT NULL,
    data           text NOT NULL,
    metadata       text,
    correlation_id text COLLATE "C",
    causation_id   text,
    time_ms        bigint NOT NULL,
    UNIQUE (stream_id, version)
);
CREATE INDEX events_by_id ON events (stream_id, event_id);
CREATE INDEX events_by_type ON events (event_type, position);
CREATE INDEX events_by_correlation ON events (correlation_id, position) WHERE correlation_id IS NOT NULL;
