//! Shared output: JSON for scripts, aligned tables for people, and the formatting of
//! durations, ages and bodies inside those tables.

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::time::Duration;

use anyhow::Result;
use comfy_table::{CellAlignment, Table, presets};
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;
use sluice_api::Message;

/// Longest body shown in a table cell, in characters; `--json` shows all of it.
const BODY_SHOWN_CHARS_MAX: usize = 60;

/// Prints `value` as pretty JSON on stdout.
pub fn json<T: Serialize>(value: &T) -> Result<()> {
    let mut out = std::io::stdout().lock();
    serde_json::to_writer_pretty(&mut out, value)?;
    writeln!(out)?;
    Ok(())
}

/// A borderless table with upper-case headers; columns listed in `right` are right-aligned
/// (numbers).
pub fn table(headers: &[&str], right: &[usize]) -> Table {
    let mut table = Table::new();
    table.load_preset(presets::NOTHING).set_header(headers.iter().map(|h| h.to_uppercase()));
    for &index in right {
        if let Some(column) = table.column_mut(index) {
            column.set_cell_alignment(CellAlignment::Right);
        }
    }
    table
}

/// A two-column table of `key value` rows.
pub fn key_values(rows: Vec<(&str, String)>) -> Table {
    let mut table = Table::new();
    table.load_preset(presets::NOTHING);
    for (key, value) in rows {
        table.add_row(vec![key.to_owned(), value]);
    }
    table
}

/// Prints a table on stdout, without the trailing spaces of its padding.
pub fn print_table(table: &Table) {
    for line in table.to_string().lines() {
        println!("{}", line.trim_end());
    }
}

/// Prints a list for people: a table of one row per item (`row`), or, when there are none,
/// `empty_hint` on stderr so that stdout stays empty for scripts.
pub fn print_rows<T>(
    items: &[T],
    empty_hint: &str,
    headers: &[&str],
    right: &[usize],
    row: impl Fn(&T) -> Vec<String>,
) {
    if items.is_empty() {
        eprintln!("{empty_hint}");
        return;
    }
    let mut table = table(headers, right);
    for item in items {
        table.add_row(row(item));
    }
    print_table(&table);
}

/// `k1=v1, k2=v2` (tags, attributes), or `-` when there are none.
pub fn pairs(map: &BTreeMap<String, String>) -> String {
    if map.is_empty() {
        return "-".to_owned();
    }
    map.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(", ")
}

/// `30s`, `4days`, `1m 30s`.
pub fn duration_ms(ms: u64) -> String {
    humantime::format_duration(Duration::from_millis(ms)).to_string()
}

/// An age rounded to the second (`-` when there is none).
pub fn age_ms(ms: Option<u64>) -> String {
    match ms {
        Some(ms) => duration_ms(ms / 1000 * 1000),
        None => "-".to_owned(),
    }
}

pub fn count(n: Option<u64>) -> String {
    n.map_or_else(|| "-".to_owned(), |n| n.to_string())
}

/// A message's body for a table cell: text on one line and cut short, or the size of binary.
pub fn body(message: &Message) -> String {
    if let Some(text) = &message.body {
        let one_line = text.replace('\n', "\\n").replace('\r', "\\r").replace('\t', "\\t");
        if one_line.chars().count() > BODY_SHOWN_CHARS_MAX {
            let cut: String = one_line.chars().take(BODY_SHOWN_CHARS_MAX - 1).collect();
            return format!("{cut}…");
        }
        return one_line;
    }
    match &message.body_base64 {
        // Base64 holds 3 bytes in 4 characters; padding makes this an upper bound within 2.
        Some(b64) => {
            let padding = b64.bytes().rev().take_while(|&b| b == b'=').count();
            format!("<{} bytes binary>", b64.len() / 4 * 3 - padding)
        }
        None => String::new(),
    }
}

/// Which columns a message table shows besides id, receives, priority and body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MessageColumns {
    /// Received messages: the receipt that ack, visibility and nack take.
    Receipt,
    /// Peeked messages: visible, in flight or delayed.
    State,
}

/// Prints messages as a table; dead-letter columns appear only when a message has them.
pub fn print_messages(messages: &[Message], columns: MessageColumns) {
    let dead_lettered = messages.iter().any(|m| m.dead_letter_source.is_some() || m.last_error.is_some());
    let mut headers = vec!["id"];
    if columns == MessageColumns::State {
        headers.push("state");
    }
    headers.extend(["receives", "priority", "body"]);
    if dead_lettered {
        headers.extend(["from", "last error"]);
    }
    if columns == MessageColumns::Receipt {
        headers.push("receipt");
    }
    let right: Vec<usize> =
        headers.iter().enumerate().filter(|(_, h)| matches!(**h, "receives" | "priority")).map(|(i, _)| i).collect();
    let mut table = table(&headers, &right);
    for m in messages {
        let mut row = vec![m.id.clone()];
        if columns == MessageColumns::State {
            row.push(m.state.clone().unwrap_or_default());
        }
        row.extend([m.receive_count.to_string(), m.priority.to_string(), body(m)]);
        if dead_lettered {
            row.push(m.dead_letter_source.clone().unwrap_or_else(|| "-".into()));
            row.push(m.last_error.clone().unwrap_or_else(|| "-".into()));
        }
        if columns == MessageColumns::Receipt {
            row.push(m.receipt.clone().unwrap_or_default());
        }
        table.add_row(row);
    }
    print_table(&table);
}

/// A progress bar on stderr when stderr is a terminal; a hidden one otherwise, so that logs and
/// pipes get no control characters.
pub fn progress(total: u64, unit: &str) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(total);
    let template = format!("{{bar:40.cyan/blue}} {{pos}}/{{len}} {unit} ({{per_sec}}, {{eta}} left)");
    if let Ok(style) = ProgressStyle::with_template(&template) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(body: Option<&str>, body_base64: Option<&str>) -> Message {
        Message {
            id: "m".into(),
            body: body.map(str::to_owned),
            body_base64: body_base64.map(str::to_owned),
            receipt: None,
            state: None,
            receive_count: 0,
            sequence_number: None,
            sent_at: String::new(),
            sent_at_ms: 0,
            first_received_at: None,
            first_received_at_ms: None,
            visible_at_ms: None,
            attributes: Default::default(),
            priority: 0,
            message_type: None,
            version: None,
            source: None,
            correlation_id: None,
            causation_id: None,
            group_id: None,
            dead_letter_source: None,
            last_error: None,
        }
    }

    #[test]
    fn bodies_fit_one_cell() {
        assert_eq!(body(&message(Some("a\nb"), None)), "a\\nb");
        let long = "x".repeat(100);
        let shown = body(&message(Some(&long), None));
        assert_eq!(shown.chars().count(), BODY_SHOWN_CHARS_MAX);
        assert!(shown.ends_with('…'));
        assert_eq!(body(&message(None, Some("AAEC"))), "<3 bytes binary>");
        assert_eq!(body(&message(None, Some("AAE="))), "<2 bytes binary>");
    }

    #[test]
    fn durations_read_like_people_write_them() {
        assert_eq!(duration_ms(30_000), "30s");
        assert_eq!(duration_ms(4 * 24 * 3600 * 1000), "4days");
        assert_eq!(age_ms(Some(90_500)), "1m 30s");
        assert_eq!(age_ms(None), "-");
    }
}
