//! Versioned schema migrations: SQL files compiled into the binary, applied in order, in one
//! transaction, under an advisory lock so that several nodes starting at once apply each
//! migration exactly once.
//!
//! `schema_migrations` records what was applied. A database that records a version this binary
//! does not know was migrated by a newer Sluice; opening it is refused rather than guessed at.

/// Every migration, in order. Versions increase; a released file is never edited (add a new
/// one instead), because databases already migrated would never see the change. A version
/// may be missing for a while (6 belongs to streams, on another branch): each migration is
/// applied when the schema has not recorded it, so one merged later is still applied.
pub const MIGRATIONS: &[Migration] = &[
    Migration { version: 1, name: "tables", sql: include_str!("../migrations/0001_tables.sql") },
    Migration { version: 2, name: "send_function", sql: include_str!("../migrations/0002_send_function.sql") },
    Migration { version: 3, name: "fifo", sql: include_str!("../migrations/0003_fifo.sql") },
    Migration { version: 4, name: "fair_groups", sql: include_str!("../migrations/0004_fair_groups.sql") },
    Migration { version: 5, name: "records", sql: include_str!("../migrations/0005_records.sql") },
    Migration { version: 6, name: "streams", sql: include_str!("../migrations/0006_streams.sql") },
    Migration { version: 7, name: "jobs", sql: include_str!("../migrations/0007_jobs.sql") },
    Migration { version: 8, name: "backpressure", sql: include_str!("../migrations/0008_backpressure.sql") },
    Migration { version: 9, name: "events", sql: include_str!("../migrations/0009_events.sql") },
    Migration { version: 10, name: "bounded_sql_send", sql: include_str!("../migrations/0010_bounded_sql_send.sql") },
];

#[derive(Debug, Clone, Copy)]
pub struct Migration {
    pub version: i32,
    pub name: &'static str,
    pub sql: &'static str,
}

/// What a migration run did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MigrationReport {
    /// Versions applied by this run, in order (empty when the schema was current).
    pub applied: Vec<i32>,
    /// The schema's version after the run.
    pub version: i32,
}

#[derive(Debug, thiserror::Error)]
pub enum MigrateError {
    #[error("database error while migrating: {}", crate::describe(.0))]
    Database(#[from] tokio_postgres::Error),
    #[error(
        "the database schema is at version {found}, newer than this binary knows ({known}); upgrade Sluice before opening it"
    )]
    TooNew { found: i32, known: i32 },
}

/// Applies every migration the connected schema lacks, in one transaction. The schema is the
/// first one on the connection's search_path.
pub async fn apply(client: &mut tokio_postgres::Client) -> Result<MigrationReport, MigrateError> {
    let tx = client.transaction().await?;
    // Serialises concurrent migrators of the same schema; released at commit or rollback, so a
    // node that dies mid-migration leaves nothing locked and nothing half-applied.
    tx.execute("SELECT pg_advisory_xact_lock(hashtext('sluice_migrate:' || current_schema()))", &[]).await?;
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations (
             version    integer PRIMARY KEY,
             name       text NOT NULL,
             applied_at timestamptz NOT NULL DEFAULT now()
         )",
    )
    .await?;
    let recorded: Vec<i32> =
        tx.query("SELECT version FROM schema_migrations", &[]).await?.iter().map(|r| r.get(0)).collect();
    let found = recorded.iter().copied().max().unwrap_or(0);
    let known = MIGRATIONS.last().map(|m| m.version).unwrap_or(0);
    if found > known {
        return Err(MigrateError::TooNew { found, known });
    }
    let mut applied = Vec::new();
    for m in MIGRATIONS.iter().filter(|m| !recorded.contains(&m.version)) {
        tx.batch_execute(m.sql).await?;
        tx.execute("INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", &[&m.version, &m.name]).await?;
        applied.push(m.version);
    }
    tx.commit().await?;
    Ok(MigrationReport { applied, version: known })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_increase_from_one() {
        assert_eq!(MIGRATIONS[0].version, 1);
        for pair in MIGRATIONS.windows(2) {
            assert!(pair[0].version < pair[1].version, "migration {} after {}", pair[1].name, pair[0].name);
        }
    }
}
