//! Opening a data directory: journal checks, the format marker, and the broker's indexes
//! rebuilt from every queue, message-metadata and dedup record (bodies stay on disk).

use std::path::Path;
use std::time::Instant;

use fjall::{Database, Keyspace, KeyspaceCreateOptions};
use sluice_core::{Broker, MessageMeta, TimeMs};

use crate::codec::{self, QueueRecord};
use crate::{OpenError, Recovery, journal, records, tables};

/// The keyspaces of the database (see `codec.rs` for what each holds).
pub struct Keyspaces {
    pub meta: Keyspace,
    pub dedup: Keyspace,
    pub queues: Keyspace,
    pub messages: Keyspace,
    pub bodies: Keyspace,
    /// Jobs (`jobs/mod.rs`): their records, and the values stored beside them.
    pub jobs: Keyspace,
    pub job_data: Keyspace,
}

/// What [`recover`] rebuilt from a data directory.
pub(crate) struct Recovered {
    pub db: Database,
    pub ks: Keyspaces,
    pub broker: Broker,
    pub records: records::Records,
    pub jobs: crate::jobs::JobState,
    pub recovery: Recovery,
}

/// Opens (or creates) the database in `path` and rebuilds the broker from it: the journals
/// are checked first (see `journal`), then every queue, message-metadata and dedup record is
/// read. Used at open, and again by the writer to resume after the disk was full.
pub(crate) fn recover(path: &Path, now: TimeMs) -> Result<Recovered, OpenError> {
    let started = Instant::now();
    let storage = |e: fjall::Error| fjall_error(path, path, "opening the database", e);
    let corrupt = |reason: String| OpenError::Corrupt { path: path.to_owned(), reason };
    std::fs::create_dir_all(path).map_err(|e| OpenError::Storage { path: path.to_owned(), reason: e.to_string() })?;
    let audit = journal::audit(path).map_err(|d| OpenError::Damaged { file: d.file, reason: d.reason })?;
    tracing::debug!(journals = audit.journals, batches = audit.batches, elapsed = ?started.elapsed(), "journals checked");
    if let Some((file, offset)) = &audit.torn_tail {
        tracing::warn!(
            "discarding the last batch of {} from byte {offset}: it was cut short by a crash while being written, so it was never acknowledged",
            file.display()
        );
    }
    let db = Database::builder(path).manual_journal_persist(true).open().map_err(storage)?;
    let keyspace = |name: &str| db.keyspace(name, KeyspaceCreateOptions::default).map_err(storage);
    let ks = Keyspaces {
        meta: keyspace("meta")?,
        dedup: keyspace("dedup")?,
        queues: keyspace("queues")?,
        messages: keyspace("messages")?,
        bodies: keyspace("bodies")?,
        jobs: keyspace("jobs")?,
        job_data: keyspace("job_data")?,
    };
    // Damage in a table's index, filter or metadata would hide intact bodies: refuse.
    if let Some((file, reason)) = tables::check_structure(path) {
        return Err(OpenError::Damaged { file, reason });
    }
    // A read error below is a keyspace that cannot be read: name it and its directory.
    let unreadable = |keyspace: &Keyspace, e: fjall::Error| {
        fjall_error(path, keyspace.path(), &format!("reading keyspace `{}`", keyspace.name()), e)
    };
    let meta = &ks.meta;
    match meta.get(codec::FORMAT_KEY).map_err(|e| unreadable(meta, e))? {
        Some(v) if &*v == codec::FORMAT_VALUE => {}
        Some(v) => return Err(corrupt(format!("format marker {:?}", String::from_utf8_lossy(&v)))),
        None => {
            meta.insert(codec::FORMAT_KEY, codec::FORMAT_VALUE).map_err(storage)?;
            db.persist(fjall::PersistMode::SyncAll).map_err(storage)?;
        }
    }

    let mut broker = Broker::new();
    if let Some(v) = meta.get(codec::HIGH_WATER_KEY).map_err(|e| unreadable(meta, e))? {
        let hw: codec::HighWater = codec::decode(&v).map_err(|e| corrupt(format!("meta/high_water: {e}")))?;
        broker.restore_high_water(hw.next_seq, hw.next_queue_id);
    }
    let mut queues = 0;
    for item in ks.queues.iter() {
        let (k, v) = item.into_inner().map_err(|e| unreadable(&ks.queues, e))?;
        let id = codec::decode_key(&k).map_err(|e| corrupt(format!("queues: {e}")))?;
        let record: QueueRecord = codec::decode_queue(&v).map_err(|e| corrupt(format!("queues/{id}: {e}")))?;
        broker.restore_queue(id, record.name, record.attributes, record.created_at, record.modified_at);
        queues += 1;
    }
    let mut messages = 0;
    let mut orphans = Vec::new();
    for item in ks.messages.iter() {
        let (k, v) = item.into_inner().map_err(|e| unreadable(&ks.messages, e))?;
        let seq = codec::decode_key(&k).map_err(|e| corrupt(format!("messages: {e}")))?;
        let meta: MessageMeta = codec::decode(&v).map_err(|e| corrupt(format!("messages/{seq}: {e}")))?;
        if broker.restore_message(seq, meta, now) {
            messages += 1;
        } else {
            orphans.push(seq);
        }
    }
    let mut stale_dedup = Vec::new();
    for item in ks.dedup.iter() {
        let (k, v) = item.into_inner().map_err(|e| unreadable(&ks.dedup, e))?;
        let (queue, key) = codec::decode_dedup_key(&k).map_err(|e| corrupt(format!("dedup: {e}")))?;
        let r: codec::DedupRecord = codec::decode(&v).map_err(|e| corrupt(format!("dedup/{queue}: {e}")))?;
        let entry = sluice_core::queue::DedupEntry { id: r.id, seq: r.seq, expires_at: r.expires_at };
        if !broker.restore_dedup(queue, key, entry, now) {
            stale_dedup.push(k);
        }
    }
    broker.finish_restore();
    let records = records::Records::load(meta).map_err(corrupt)?;
    let (jobs, job_count) =
        crate::jobs::recover(ks.jobs.clone(), ks.job_data.clone(), now, Default::default()).map_err(corrupt)?;
    if !stale_dedup.is_empty() {
        let mut batch = db.batch();
        for k in stale_dedup {
            batch.remove(&ks.dedup, k);
        }
        batch.durability(Some(fjall::PersistMode::SyncData)).commit().map_err(storage)?;
    }
    if !orphans.is_empty() {
        // Only possible if a queue record vanished; never keep messages no queue owns.
        tracing::warn!("removing {} messages whose queue no longer exists", orphans.len());
        let mut batch = db.batch();
        for seq in orphans {
            batch.remove(&ks.messages, codec::key(seq));
            batch.remove(&ks.bodies, codec::key(seq));
        }
        batch.durability(Some(fjall::PersistMode::SyncData)).commit().map_err(storage)?;
    }
    let recovery = Recovery { queues, messages, jobs: job_count, elapsed: started.elapsed() };
    tracing::debug!(queues, messages, jobs = job_count, records = records.count(), elapsed = ?recovery.elapsed, "recovered");
    Ok(Recovered { db, ks, broker, records, jobs, recovery })
}

/// Sorts a fjall error met while opening. Damage (a checksum, a tag or a trailer that does
/// not match, but also a damaged length or position that sends a read past the end of its
/// file or to an invalid offset) names the file or directory it was found in; anything else
/// is an I/O problem. fjall does not say which file failed, so every error that could come
/// from damage is followed by a search for a damaged file.
fn fjall_error(data_dir: &Path, place: &Path, doing: &str, e: fjall::Error) -> OpenError {
    use std::io::ErrorKind::{FileTooLarge, PermissionDenied, QuotaExceeded, ReadOnlyFilesystem, StorageFull};
    let io = match &e {
        fjall::Error::Io(io) | fjall::Error::Storage(fjall::LsmError::Io(io)) => Some(io.kind()),
        _ => None,
    };
    let environment = matches!(&e, fjall::Error::Locked | fjall::Error::Poisoned | fjall::Error::KeyspaceDeleted)
        || io.is_some_and(|kind| {
            matches!(kind, StorageFull | QuotaExceeded | FileTooLarge | PermissionDenied | ReadOnlyFilesystem)
        });
    if environment {
        return OpenError::Storage { path: data_dir.to_owned(), reason: format!("{doing}: {e}") };
    }
    if let Some((file, found)) = tables::locate_damage(data_dir) {
        return OpenError::Damaged { file, reason: format!("{found} ({doing} failed: {e})") };
    }
    match io {
        Some(_) => OpenError::Storage { path: data_dir.to_owned(), reason: format!("{doing}: {e}") },
        None => OpenError::Damaged { file: place.to_owned(), reason: format!("{doing} failed: {e}") },
    }
}
