//! Streams: every `/v1/streams` call, a [`Producer`], and consumers for both group modes that
//! commit (or acknowledge) only after the handler succeeded.
//!
//! ```no_run
//! # async fn demo() -> Result<(), sluice_client::ClientError> {
//! use sluice_client::streams::{OffsetsConsumer, Producer};
//! let client = sluice_client::Client::new("http://127.0.0.1:9324")?;
//! let producer = Producer::new(client.clone(), "orders");
//! producer.send(Some("customer-7"), "order 1").await?;
//! let mut consumer = OffsetsConsumer::new(client, "orders", "billing", "worker-1");
//! consumer
//!     .next_batch(|records| async move {
//!         println!("{} records", records.len());
//!         Ok::<(), std::io::Error>(())
//!     })
//!     .await?;
//! # Ok(()) }
//! ```

use std::collections::BTreeMap;
use std::fmt::Display;
use std::future::Future;

use reqwest::{Method, StatusCode};
use sluice_api::{
    AppendRecord, AppendRequest, AppendResponse, AppendResult, BatchResponse, CommitRequest, CreateGroupRequest,
    CreateStreamRequest, FetchRequest, FetchResponse, GroupList, ReadResponse, ReceiptsRequest, SeekRequest,
    SeekResponse, Stream, StreamGroup, StreamList, StreamRecord, UpdateStreamRequest,
};

use crate::{Client, ClientError, Result};

/// What [`Client::create_stream`] and [`Client::create_group`] return.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Created<T> {
    /// As it is now.
    pub value: T,
    /// False when an identical one already existed.
    pub created: bool,
}

/// Where a read starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum From {
    /// The partition's first kept record.
    Start,
    /// This offset (inclusive).
    Offset(u64),
    /// The first record at or after this time (ms since the epoch).
    TimeMs(u64),
}

impl Client {
    /// `POST /v1/streams`.
    pub async fn create_stream(&self, request: &CreateStreamRequest) -> Result<Created<Stream>> {
        let (status, value) = self.json_with_status(Method::POST, &["v1", "streams"], &[], Some(request)).await?;
        Ok(Created { value, created: status == StatusCode::CREATED })
    }

    /// `GET /v1/streams`: one page of streams in name order.
    pub async fn list_streams(&self, prefix: Option<&str>, next_token: Option<&str>) -> Result<StreamList> {
        let query: Vec<(&str, &str)> = [("prefix", prefix), ("next_token", next_token)]
            .into_iter()
            .filter_map(|(k, v)| v.map(|v| (k, v)))
            .collect();
        self.json(Method::GET, &["v1", "streams"], &query, None::<&()>).await
    }

    /// Every stream whose name starts with `prefix`, across pages.
    pub async fn list_all_streams(&self, prefix: Option<&str>) -> Result<Vec<Stream>> {
        let mut out = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let page = self.list_streams(prefix, token.as_deref()).await?;
            out.extend(page.streams);
            match page.next_token {
                Some(next) if Some(&next) != token.as_ref() => token = Some(next),
                _ => return Ok(out),
            }
        }
    }

    /// `GET /v1/streams/{name}`: settings, partitions and groups with their lag.
    pub async fn get_stream(&self, name: &str) -> Result<Stream> {
        self.json(Method::GET, &["v1", "streams", name], &[], None::<&()>).await
    }

    /// `PATCH /v1/streams/{name}`.
    pub async fn update_stream(&self, name: &str, request: &UpdateStreamRequest) -> Result<Stream> {
        self.json(Method::PATCH, &["v1", "streams", name], &[], Some(request)).await
    }

    /// `DELETE /v1/streams/{name}`: the stream, its records and its groups.
    pub async fn delete_stream(&self, name: &str) -> Result<()> {
        let call = self.call(Method::DELETE, &["v1", "streams", name], &[], None::<&()>, self.timeout)?;
        let (status, body) = self.execute(call).await?;
        if status.is_success() { Ok(()) } else { Err(crate::error_from(status, &body)) }
    }

    /// `POST /v1/streams/{name}/records`: up to 1,000 records; one result per record.
    pub async fn append(&self, stream: &str, records: Vec<AppendRecord>) -> Result<Vec<AppendResult>> {
        let request = AppendRequest { records };
        let answer: AppendResponse =
            self.json(Method::POST, &["v1", "streams", stream, "records"], &[], Some(&request)).await?;
        Ok(answer.results)
    }

    /// `GET /v1/streams/{name}/partitions/{p}/records`, long-polling up to `wait_ms` at the end.
    pub async fn read_records(
        &self,
        stream: &str,
        partition: u32,
        from: From,
        max: u32,
        wait_ms: u64,
    ) -> Result<ReadResponse> {
        let (max, wait, position) = (
            max.to_string(),
            wait_ms.to_string(),
            match from {
                From::Start => None,
                From::Offset(o) => Some(("from_offset", o.to_string())),
                From::TimeMs(t) => Some(("from_time_ms", t.to_string())),
            },
        );
        let mut query = vec![("max", max.as_str()), ("wait_ms", wait.as_str())];
        if let Some((name, value)) = &position {
            query.push((name, value.as_str()));
        }
        let partition = partition.to_string();
        let timeout = self.timeout + std::time::Duration::from_millis(wait_ms);
        let path = ["v1", "streams", stream, "partitions", &partition, "records"];
        let call = self.call(Method::GET, &path, &query, None::<&()>, timeout)?;
        let (status, body) = self.execute(call).await?;
        crate::decode(status, &body)
    }

    /// `POST /v1/streams/{name}/groups`.
    pub async fn create_group(&self, stream: &str, request: &CreateGroupRequest) -> Result<Created<StreamGroup>> {
        let (status, value) =
            self.json_with_status(Method::POST, &["v1", "streams", stream, "groups"], &[], Some(request)).await?;
        Ok(Created { value, created: status == StatusCode::CREATED })
    }

    /// `GET /v1/streams/{name}/groups`.
    pub async fn list_groups(&self, stream: &str) -> Result<Vec<StreamGroup>> {
        let list: GroupList = self.json(Method::GET, &["v1", "streams", stream, "groups"], &[], None::<&()>).await?;
        Ok(list.groups)
    }

    /// `GET /v1/streams/{name}/groups/{group}`.
    pub async fn get_group(&self, stream: &str, group: &str) -> Result<StreamGroup> {
        self.json(Method::GET, &["v1", "streams", stream, "groups", group], &[], None::<&()>).await
    }

    /// `DELETE /v1/streams/{name}/groups/{group}`.
    pub async fn delete_group(&self, stream: &str, group: &str) -> Result<()> {
        let call =
            self.call(Method::DELETE, &["v1", "streams", stream, "groups", group], &[], None::<&()>, self.timeout)?;
        let (status, body) = self.execute(call).await?;
        if status.is_success() { Ok(()) } else { Err(crate::error_from(status, &body)) }
    }

    /// `POST .../groups/{group}/fetch`, long-polling up to `wait_ms`.
    pub async fn fetch(
        &self,
        stream: &str,
        group: &str,
        member: &str,
        max: u32,
        wait_ms: u64,
    ) -> Result<FetchResponse> {
        let request = FetchRequest { member: member.to_owned(), max: Some(max), wait_ms: Some(wait_ms) };
        let timeout = self.timeout + std::time::Duration::from_millis(wait_ms);
        let call = self
            .call(Method::POST, &["v1", "streams", stream, "groups", group, "fetch"], &[], Some(&request), timeout)?
            .without_key();
        let (status, body) = self.execute(call).await?;
        crate::decode(status, &body)
    }

    /// `POST .../groups/{group}/commit`: the next offsets to read, by partition.
    pub async fn commit(
        &self,
        stream: &str,
        group: &str,
        member: &str,
        generation: u64,
        offsets: &BTreeMap<u32, u64>,
    ) -> Result<()> {
        let offsets = offsets.iter().map(|(p, o)| (p.to_string(), *o)).collect();
        let request = CommitRequest { member: member.to_owned(), generation, offsets };
        let call = self.call(
            Method::POST,
            &["v1", "streams", stream, "groups", group, "commit"],
            &[],
            Some(&request),
            self.timeout,
        )?;
        let (status, body) = self.execute(call).await?;
        if status.is_success() { Ok(()) } else { Err(crate::error_from(status, &body)) }
    }

    /// `POST .../groups/{group}/seek`.
    pub async fn seek(&self, stream: &str, group: &str, request: &SeekRequest) -> Result<SeekResponse> {
        self.json(Method::POST, &["v1", "streams", stream, "groups", group, "seek"], &[], Some(request)).await
    }

    /// `POST .../groups/{group}/ack`, `release` or `nack` (`verb`), shared mode.
    pub async fn settle(
        &self,
        stream: &str,
        group: &str,
        verb: Settle,
        receipts: Vec<String>,
        error: Option<String>,
    ) -> Result<BatchResponse> {
        let request = ReceiptsRequest { receipts, error };
        self.json(Method::POST, &["v1", "streams", stream, "groups", group, verb.path()], &[], Some(&request)).await
    }
}

/// Which shared-mode call ends deliveries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settle {
    /// Done.
    Ack,
    /// Given back, not a failure.
    Release,
    /// Given back as a failure (dead-lettered after `max_deliveries`).
    Nack,
}

impl Settle {
    fn path(self) -> &'static str {
        match self {
            Settle::Ack => "ack",
            Settle::Release => "release",
            Settle::Nack => "nack",
        }
    }
}

/// Appends to one stream. Every record gets a `dedup_id` unless it has one, so that a retry
/// after a lost answer (which this producer makes, up to the client's attempts) is appended
/// once, within the server's 5-minute dedup window.
#[derive(Debug, Clone)]
pub struct Producer {
    client: Client,
    stream: String,
}

impl Producer {
    /// A producer for `stream`.
    pub fn new(client: Client, stream: &str) -> Producer {
        Producer { client, stream: stream.to_owned() }
    }

    /// Appends one text record, with an optional key; its result (partition, offset).
    pub async fn send(&self, key: Option<&str>, body: &str) -> Result<AppendResult> {
        let record = AppendRecord { key: key.map(str::to_owned), body: Some(body.to_owned()), ..Default::default() };
        let result = self.send_batch(vec![record]).await?.into_iter().next();
        match result {
            Some(AppendResult { error: Some(e), .. }) => Err(ClientError::from_entry(e)),
            Some(r) => Ok(r),
            None => Err(ClientError::Decode { status: 200, reason: "the append answer has no result".into() }),
        }
    }

    /// Appends up to 1,000 records, retrying the whole batch (safely, by dedup id) when the
    /// connection fails or the server answers 503.
    pub async fn send_batch(&self, mut records: Vec<AppendRecord>) -> Result<Vec<AppendResult>> {
        for r in &mut records {
            if r.dedup_id.is_none() {
                r.dedup_id = Some(format!("{:032x}", rand::random::<u128>()));
            }
        }
        let mut attempt = 0;
        loop {
            attempt += 1;
            match self.client.append(&self.stream, records.clone()).await {
                Ok(results) => return Ok(results),
                Err(e) if attempt < self.client.retry.attempts_max && retryable(&e) => {
                    let delay = self.client.retry.backoff.delay_ms(attempt - 1, rand::random());
                    tokio::time::sleep(std::time::Duration::from_millis(delay)).await;
                }
                Err(e) => return Err(e),
            }
        }
    }
}

fn retryable(e: &ClientError) -> bool {
    matches!(e, ClientError::Connect { .. } | ClientError::Transport { .. }) || e.status() == Some(503)
}

/// What one round of a consumer did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Round {
    /// Records handed to the handler.
    pub records: usize,
    /// Records committed (offsets mode) or acknowledged (shared mode) after it succeeded.
    pub done: usize,
}

/// An `offsets`-mode member: fetches a batch, hands it to the handler, and commits the next
/// offsets only if the handler succeeded. If it failed, the member seeks its partitions back to
/// the batch's first records, so the next fetch reads them again (at least once). A commit
/// refused as `stale_generation` (the partitions moved on meanwhile) is left to their new
/// owner, who reads from the last commit.
#[derive(Debug, Clone)]
pub struct OffsetsConsumer {
    client: Client,
    stream: String,
    group: String,
    member: String,
    /// Records per fetch (default 100).
    pub max: u32,
    /// How long a fetch waits for records (default 5 s).
    pub wait_ms: u64,
}

impl OffsetsConsumer {
    /// A member `member` of group `group` of `stream`.
    pub fn new(client: Client, stream: &str, group: &str, member: &str) -> OffsetsConsumer {
        OffsetsConsumer {
            client,
            stream: stream.to_owned(),
            group: group.to_owned(),
            member: member.to_owned(),
            max: 100,
            wait_ms: 5_000,
        }
    }

    /// One fetch, one handler call, one commit.
    pub async fn next_batch<F, Fut, E>(&mut self, mut handler: F) -> Result<Round>
    where
        F: FnMut(Vec<StreamRecord>) -> Fut,
        Fut: Future<Output = std::result::Result<(), E>>,
        E: Display,
    {
        let f = self.client.fetch(&self.stream, &self.group, &self.member, self.max, self.wait_ms).await?;
        if f.records.is_empty() {
            return Ok(Round::default());
        }
        let mut first: BTreeMap<u32, u64> = BTreeMap::new();
        let mut next: BTreeMap<u32, u64> = BTreeMap::new();
        for r in &f.records {
            first.entry(r.partition).or_insert(r.offset);
            next.insert(r.partition, r.offset + 1);
        }
        let count = f.records.len();
        match handler(f.records).await {
            Ok(()) => {
                let generation = f.generation.unwrap_or(0);
                match self.client.commit(&self.stream, &self.group, &self.member, generation, &next).await {
                    Ok(()) => Ok(Round { records: count, done: count }),
                    Err(e) if e.code_str() == Some("stale_generation") => Ok(Round { records: count, done: 0 }),
                    Err(e) => Err(e),
                }
            }
            Err(_) => {
                for (partition, offset) in first {
                    let request = SeekRequest { partition, offset: Some(offset), time_ms: None };
                    self.client.seek(&self.stream, &self.group, &request).await?;
                }
                Ok(Round { records: count, done: 0 })
            }
        }
    }
}

/// A `shared`-mode member: fetches records with receipts, hands each to the handler, acks those
/// it handled and nacks (with the handler's error as the record's last error) those it failed.
#[derive(Debug, Clone)]
pub struct SharedConsumer {
    client: Client,
    stream: String,
    group: String,
    member: String,
    /// Records per fetch (default 10).
    pub max: u32,
    /// How long a fetch waits for records (default 5 s).
    pub wait_ms: u64,
}

impl SharedConsumer {
    /// A member `member` of shared group `group` of `stream`.
    pub fn new(client: Client, stream: &str, group: &str, member: &str) -> SharedConsumer {
        SharedConsumer {
            client,
            stream: stream.to_owned(),
            group: group.to_owned(),
            member: member.to_owned(),
            max: 10,
            wait_ms: 5_000,
        }
    }

    /// One fetch; the handler once per record, in order.
    pub async fn next_batch<F, Fut, E>(&mut self, mut handler: F) -> Result<Round>
    where
        F: FnMut(StreamRecord) -> Fut,
        Fut: Future<Output = std::result::Result<(), E>>,
        E: Display,
    {
        let f = self.client.fetch(&self.stream, &self.group, &self.member, self.max, self.wait_ms).await?;
        let count = f.records.len();
        let mut acks = Vec::new();
        for r in f.records {
            let Some(receipt) = r.receipt.clone() else { continue };
            match handler(r).await {
                Ok(()) => acks.push(receipt),
                Err(e) => {
                    self.client
                        .settle(&self.stream, &self.group, Settle::Nack, vec![receipt], Some(e.to_string()))
                        .await?;
                }
            }
        }
        let done = acks.len();
        if !acks.is_empty() {
            self.client.settle(&self.stream, &self.group, Settle::Ack, acks, None).await?;
        }
        Ok(Round { records: count, done })
    }
}
