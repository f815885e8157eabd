-- Sluice's PostgreSQL schema, version 5: records, the durable configuration values of
-- `Store::insert_record` and friends (topics and subscriptions, for now). How the calls use it is
-- in src/records.rs.

-- One row per record. Keys compare byte-wise (COLLATE "C") so that listing pages in the same
-- order as the embedded store. Rows are few and change rarely, so the table keeps PostgreSQL's
-- default autovacuum settings.
CREATE TABLE records (
    kind       text COLLATE "C" NOT NULL,
    key        text COLLATE "C" NOT NULL,
    value      bytea NOT NULL,
    updated_at bigint NOT NULL,
    PRIMARY KEY (kind, key)
);
