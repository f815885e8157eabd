//! `sluice send`: one message from an argument, a file or stdin, or one message per line sent
//! in batches.

use std::io::Read;
use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use sluice_api::{Attribute, SendMessage, SendRequest, SendResponse};
use sluice_core::limits::{BATCH_ENTRIES_MAX, MESSAGE_BYTES_LIMIT, REQUEST_BYTES_MAX};

use super::{ClientArgs, parse_attribute, parse_duration_ms};
use crate::output;

/// Body bytes per send request: half the request limit, leaving room for base64 and JSON.
const SEND_BATCH_BYTES_MAX: usize = REQUEST_BYTES_MAX / 2;

/// Send messages to a queue and print their ids.
///
/// The body is the BODY argument, the contents of --file, or standard input with --stdin, sent
/// byte for byte (as base64 binary when it is not UTF-8). With --lines every line is its own
/// message, sent in batches of up to 1000. Exits non-zero if any message was refused.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  sluice send jobs 'hello'\n  sluice send jobs --file invoice.json --type invoice.created --attr tenant=String:acme\n  sluice send jobs --delay 10m --priority 9 'urgent later'\n  seq 1 10000 | sluice send jobs --stdin --lines\n  sluice send orders --idempotency-key order-42 'charge 42'"
)]
pub struct Args {
    /// Queue to send to.
    queue: String,
    /// The message body, as text.
    #[arg(conflicts_with_all = ["file", "stdin"])]
    body: Option<String>,
    /// Read the body from this file.
    #[arg(long, value_name = "PATH", conflicts_with = "stdin")]
    file: Option<PathBuf>,
    /// Read the body from standard input.
    #[arg(long)]
    stdin: bool,
    /// Send each line of --file or --stdin as its own message; blank lines are skipped.
    #[arg(long)]
    lines: bool,
    /// Hide the message(s) for this long after sending.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration_ms, conflicts_with = "deliver_at")]
    delay: Option<u64>,
    /// Hide the message(s) until this time, e.g. 2030-01-01T09:00:00Z.
    #[arg(long, value_name = "RFC3339")]
    deliver_at: Option<String>,
    /// 0 (default) to 9; higher priorities are received first.
    #[arg(long, value_parser = clap::value_parser!(u8).range(0..=9))]
    priority: Option<u8>,
    /// A typed attribute: NAME=String:text, NAME=Number:42 or NAME=Binary:<base64>; repeat for
    /// several.
    #[arg(long = "attr", value_name = "NAME=TYPE:VALUE", value_parser = parse_attribute)]
    attributes: Vec<(String, Attribute)>,
    /// The message's type, e.g. invoice.created: on a queue with schema validation, the
    /// schema its body is checked against.
    #[arg(long = "type", value_name = "TYPE")]
    message_type: Option<String>,
    /// The schema version to check against; default: the type's latest.
    #[arg(long = "version", value_name = "N", requires = "message_type")]
    schema_version: Option<u32>,
    /// Where the message comes from, e.g. billing-service.
    #[arg(long)]
    source: Option<String>,
    /// An id tying related messages together; `sluice trace ID` lists what carried it.
    #[arg(long, value_name = "ID")]
    correlation_id: Option<String>,
    /// The id of what caused this message (a message, event, job or saga step id): the
    /// link `sluice trace` orders by.
    #[arg(long, value_name = "ID")]
    causation_id: Option<String>,
    /// Message group: required on FIFO queues (order is kept per group).
    #[arg(long, value_name = "GROUP")]
    group: Option<String>,
    /// FIFO: a resend with the same id inside the dedup window enqueues nothing.
    #[arg(long, value_name = "ID")]
    dedup_id: Option<String>,
    /// Send under this Idempotency-Key (1 to 255 visible ASCII): running the same command
    /// again within the server's --idempotency-ttl sends nothing more and prints the first
    /// run's ids. With --lines, batch N is sent under KEY-N.
    #[arg(long, value_name = "KEY")]
    idempotency_key: Option<String>,
    #[command(flatten)]
    client: ClientArgs,
}

/// A message and how to name it in an error ("line 7").
struct Entry {
    label: String,
    message: SendMessage,
}

pub async fn run(args: Args) -> Result<()> {
    let template = SendMessage {
        attributes: args.attributes.iter().cloned().collect(),
        delay_ms: args.delay,
        deliver_at: args.deliver_at.clone(),
        priority: args.priority,
        message_type: args.message_type.clone(),
        version: args.schema_version.map(|v| v.to_string()),
        source: args.source.clone(),
        correlation_id: args.correlation_id.clone(),
        causation_id: args.causation_id.clone(),
        group_id: args.group.clone(),
        dedup_id: args.dedup_id.clone(),
        ..Default::default()
    };
    let entries = read_entries(&args, &template).await?;
    if entries.is_empty() {
        bail!("the input has no lines to send");
    }
    let client = args.client.client()?;
    let total = entries.len();
    let bar = if args.lines { output::progress(total as u64, "messages") } else { indicatif::ProgressBar::hidden() };

    let mut results = Vec::with_capacity(total);
    let mut depth = None;
    let mut failed = 0usize;
    for (n, batch) in batches(entries).into_iter().enumerate() {
        let (labels, messages): (Vec<String>, Vec<SendMessage>) =
            batch.into_iter().map(|e| (e.label, e.message)).unzip();
        let count = messages.len();
        let sent_before = results.len();
        let request = SendRequest { messages };
        let sent = match &args.idempotency_key {
            // Batches are cut the same way on every run of the same input, so a rerun sends
            // each batch under the key it had.
            Some(key) if args.lines => {
                client.send_messages_with_key(&args.queue, &request, &format!("{key}-{}", n + 1)).await
            }
            Some(key) => client.send_messages_with_key(&args.queue, &request, key).await,
            None => client.send_messages(&args.queue, &request).await,
        };
        let response = match sent {
            Ok(response) => response,
            Err(e) if sent_before == 0 => return Err(e.into()),
            Err(e) => {
                return Err(anyhow::Error::from(e)
                    .context(format!("{sent_before} of {total} messages were sent before this failure")));
            }
        };
        for (label, result) in labels.iter().zip(&response.results) {
            match (&result.id, &result.error) {
                (_, Some(error)) => {
                    failed += 1;
                    bar.suspend(|| eprintln!("error: {label}: {} ({})", error.message, error.code));
                }
                (Some(id), None) if !args.client.json => bar.suspend(|| println!("{id}")),
                _ => {}
            }
        }
        results.extend(response.results);
        depth = response.depth.or(depth);
        bar.inc(count as u64);
    }
    bar.finish_and_clear();
    if args.client.json {
        output::json(&SendResponse { results, depth })?;
    }
    if failed > 0 {
        bail!("{failed} of {total} messages were not sent");
    }
    Ok(())
}

async fn read_entries(args: &Args, template: &SendMessage) -> Result<Vec<Entry>> {
    let input = if let Some(body) = &args.body {
        if args.lines {
            bail!("--lines splits --file or --stdin; give one of those instead of a BODY argument");
        }
        return Ok(vec![Entry {
            label: "message".into(),
            message: SendMessage { body: Some(body.clone()), ..template.clone() },
        }]);
    } else if let Some(path) = &args.file {
        if !args.lines {
            let size =
                tokio::fs::metadata(path).await.with_context(|| format!("cannot read {}", path.display()))?.len();
            if size > MESSAGE_BYTES_LIMIT {
                bail!(
                    "{} is {size} bytes; a message holds at most {MESSAGE_BYTES_LIMIT} (use --lines to send one message per line)",
                    path.display()
                );
            }
        }
        tokio::fs::read(path).await.with_context(|| format!("cannot read {}", path.display()))?
    } else if args.stdin {
        tokio::task::spawn_blocking(|| {
            let mut input = Vec::new();
            std::io::stdin().read_to_end(&mut input).map(|_| input)
        })
        .await?
        .context("cannot read standard input")?
    } else {
        bail!("nothing to send: give a BODY argument, --file PATH or --stdin");
    };
    if !args.lines {
        return Ok(vec![Entry { label: "message".into(), message: with_body(input, template) }]);
    }
    Ok(split_lines(&input)
        .map(|(number, line)| Entry { label: format!("line {number}"), message: with_body(line.to_vec(), template) })
        .collect())
}

/// Non-blank lines with their 1-based numbers, without `\n` or `\r\n`.
fn split_lines(input: &[u8]) -> impl Iterator<Item = (usize, &[u8])> {
    input.split(|&b| b == b'\n').enumerate().filter_map(|(index, line)| {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        (!line.is_empty()).then_some((index + 1, line))
    })
}

/// Text when the bytes are UTF-8, base64 binary otherwise.
fn with_body(bytes: Vec<u8>, template: &SendMessage) -> SendMessage {
    match String::from_utf8(bytes) {
        Ok(text) => SendMessage { body: Some(text), ..template.clone() },
        Err(e) => SendMessage { body_base64: Some(BASE64.encode(e.into_bytes())), ..template.clone() },
    }
}

/// Splits entries into requests of at most `BATCH_ENTRIES_MAX` entries and
/// `SEND_BATCH_BYTES_MAX` body bytes.
fn batches(entries: Vec<Entry>) -> Vec<Vec<Entry>> {
    let mut batches: Vec<Vec<Entry>> = Vec::new();
    let mut bytes = 0usize;
    for entry in entries {
        let size = entry.message.body.as_ref().map_or(0, String::len)
            + entry.message.body_base64.as_ref().map_or(0, String::len);
        // A batch is never empty, so an oversized message still goes out, alone.
        let start_new =
            batches.last().is_none_or(|batch| batch.len() >= BATCH_ENTRIES_MAX || bytes + size > SEND_BATCH_BYTES_MAX);
        if start_new {
            batches.push(Vec::new());
            bytes = 0;
        }
        bytes += size;
        batches.last_mut().expect("a batch was just pushed").push(entry);
    }
    batches
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(body: &str) -> Entry {
        Entry { label: String::new(), message: SendMessage { body: Some(body.into()), ..Default::default() } }
    }

    #[test]
    fn lines_skip_blanks_and_keep_numbers() {
        let lines: Vec<(usize, &[u8])> = split_lines(b"a\r\n\nb\n\xff\n").collect();
        assert_eq!(lines, vec![(1, &b"a"[..]), (3, &b"b"[..]), (4, &b"\xff"[..])]);
        let message = with_body(b"\xff".to_vec(), &SendMessage::default());
        assert_eq!((message.body, message.body_base64.as_deref()), (None, Some("/w==")));
    }

    #[test]
    fn batches_respect_count_and_bytes() {
        let sizes: Vec<usize> = batches((0..2_500).map(|_| entry("x")).collect()).iter().map(Vec::len).collect();
        assert_eq!(sizes, [1_000, 1_000, 500]);
        let big = "x".repeat(SEND_BATCH_BYTES_MAX / 2 + 1);
        let sizes: Vec<usize> = batches(vec![entry(&big), entry(&big), entry("y")]).iter().map(Vec::len).collect();
        assert_eq!(sizes, [1, 2]);
    }
}
