//! Which systems the peers scenario can measure, how they are named on the command line, and
//! what durability each one promises when it acknowledges a write.

/// One system at one durability setting: a row group of the report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum System {
    SluiceFsync,
    SluiceInterval,
    /// Sluice at `fsync` over its SQS API, through aws-sdk-sqs: compared with `SluiceFsync`,
    /// not with the peers.
    SluiceSqs,
    /// Sluice over PostgreSQL: one in-process server.
    SluicePg,
    /// Sluice over PostgreSQL: three in-process servers sharing one schema, the clients spread
    /// over them.
    SluicePg3Nodes,
    RabbitClassic,
    RabbitQuorum,
    NatsDefault,
    NatsAlways,
    RedisDefault,
    RedisAlways,
    Postgres,
}

/// What an acknowledged write survives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Durability {
    /// Synced to disk before the write is acknowledged (group commit allowed).
    PerWrite,
    /// Written to the OS and synced on a timer: a power loss can lose the last interval.
    Deferred,
    /// Not written to disk at all (or only by snapshots the server may not take).
    Memory,
}

impl Durability {
    pub fn label(self) -> &'static str {
        match self {
            Durability::PerWrite => "per-write",
            Durability::Deferred => "deferred",
            Durability::Memory => "memory",
        }
    }
}

impl System {
    /// Every system, in report order: Sluice first, then each peer's per-write setting last.
    pub const ALL: [System; 12] = [
        System::SluiceFsync,
        System::SluiceInterval,
        System::SluiceSqs,
        System::SluicePg,
        System::SluicePg3Nodes,
        System::RabbitClassic,
        System::RabbitQuorum,
        System::NatsDefault,
        System::NatsAlways,
        System::RedisDefault,
        System::RedisAlways,
        System::Postgres,
    ];

    /// As written in `--only`, the report and the JSON `system` field.
    pub fn name(self) -> &'static str {
        match self {
            System::SluiceFsync => "sluice-fsync",
            System::SluiceInterval => "sluice-interval",
            System::SluiceSqs => "sluice-sqs",
            System::SluicePg => "sluice-pg",
            System::SluicePg3Nodes => "sluice-pg-3nodes",
            System::RabbitClassic => "rabbitmq-classic",
            System::RabbitQuorum => "rabbitmq-quorum",
            System::NatsDefault => "nats-default",
            System::NatsAlways => "nats-always",
            System::RedisDefault => "redis-default",
            System::RedisAlways => "redis-always",
            System::Postgres => "postgres",
        }
    }

    /// The product, as `--only` names a whole family. Sluice over PostgreSQL is a family of its
    /// own, so that `--only sluice` needs no database.
    pub fn family(self) -> &'static str {
        match self {
            System::SluiceFsync | System::SluiceInterval | System::SluiceSqs => "sluice",
            System::SluicePg | System::SluicePg3Nodes => "sluice-pg",
            System::RabbitClassic | System::RabbitQuorum => "rabbitmq",
            System::NatsDefault | System::NatsAlways => "nats",
            System::RedisDefault | System::RedisAlways => "redis",
            System::Postgres => "postgres",
        }
    }

    /// Sluice on any store and over either API: never counted among the peers it is compared with.
    pub fn is_sluice(self) -> bool {
        self.family().starts_with("sluice")
    }

    /// Whether measuring it needs the PostgreSQL server (and so whether pgbench is worth running).
    pub fn uses_postgres(self) -> bool {
        matches!(self, System::SluicePg | System::SluicePg3Nodes | System::Postgres)
    }

    /// Sluice servers sharing one database, for the report; `None` for the other systems.
    pub fn pg_nodes(self) -> Option<usize> {
        match self {
            System::SluicePg => Some(1),
            System::SluicePg3Nodes => Some(3),
            _ => None,
        }
    }

    /// What an acknowledged send survives with the settings this harness uses. The running
    /// Redis is asked for its persistence settings, so its class is decided at run time and
    /// this is only the expectation for a server left at Redis's defaults.
    pub fn durability(self) -> Durability {
        match self {
            System::SluiceFsync
            | System::SluiceSqs
            | System::SluicePg
            | System::SluicePg3Nodes
            | System::RabbitClassic
            | System::RabbitQuorum
            | System::NatsAlways
            | System::RedisAlways
            | System::Postgres => Durability::PerWrite,
            System::SluiceInterval | System::NatsDefault => Durability::Deferred,
            System::RedisDefault => Durability::Memory,
        }
    }
}

/// The systems `--only` selects, in report order. Each item is a system's name or a family
/// (`sluice`, `sluice-pg`, `rabbitmq`, `nats`, `redis`, `postgres`); empty means all.
pub(crate) fn select(only: &[String]) -> Result<Vec<System>, String> {
    if only.is_empty() {
        return Ok(System::ALL.to_vec());
    }
    let mut chosen = Vec::new();
    for item in only {
        let item = item.trim();
        let matched: Vec<System> =
            System::ALL.iter().copied().filter(|s| s.name() == item || s.family() == item).collect();
        if matched.is_empty() {
            let names: Vec<&str> = System::ALL.iter().map(|s| s.name()).collect();
            return Err(format!(
                "--only {item}: not a system; use sluice, sluice-pg, rabbitmq, nats, redis, postgres or one of {}",
                names.join(", ")
            ));
        }
        chosen.extend(matched);
    }
    chosen.sort();
    chosen.dedup();
    Ok(chosen)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(only: &str) -> Result<Vec<&'static str>, String> {
        let only: Vec<String> = only.split(',').filter(|s| !s.is_empty()).map(str::to_owned).collect();
        select(&only).map(|systems| systems.into_iter().map(System::name).collect())
    }

    #[test]
    fn only_takes_families_and_names_in_report_order() {
        assert_eq!(names("").map(|n| n.len()), Ok(12));
        assert_eq!(names("nats,sluice-fsync"), Ok(vec!["sluice-fsync", "nats-default", "nats-always"]));
        assert_eq!(
            names("postgres,sluice,postgres"),
            Ok(vec!["sluice-fsync", "sluice-interval", "sluice-sqs", "postgres"])
        );
        assert_eq!(names("sluice-sqs,sluice-fsync"), Ok(vec!["sluice-fsync", "sluice-sqs"]));
        assert_eq!(names("postgres,sluice-pg"), Ok(vec!["sluice-pg", "sluice-pg-3nodes", "postgres"]));
        assert_eq!(names("sluice-pg-3nodes"), Ok(vec!["sluice-pg-3nodes"]));
        assert!(names("kafka").is_err_and(|e| e.starts_with("--only kafka: not a system")));
    }

    #[test]
    fn every_name_is_unique_and_in_its_family() {
        for system in System::ALL {
            assert!(system.name().starts_with(system.family()), "{system:?}");
            assert_eq!(System::ALL.iter().filter(|s| s.name() == system.name()).count(), 1);
        }
        assert_eq!(System::ALL.iter().filter(|s| s.durability() == Durability::PerWrite).count(), 9);
        assert!(System::ALL.iter().filter(|s| s.pg_nodes().is_some()).all(|s| s.is_sluice() && s.uses_postgres()));
        assert!(System::SluiceSqs.is_sluice() && !System::SluiceSqs.uses_postgres());
    }
}
