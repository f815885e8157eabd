//! Data-driven tests of the queue state machine: a script of operations on an injected clock,
//! run by one `check` function that prints a trace and compares it with a snapshot.
//!
//! Each script line is an operation; the trace echoes it and indents what it did beneath.
//! Messages are labelled `m1, m2, …` in send order (their `MessageId` is that number), and
//! receipts `r1, r2, …` in delivery order; a receipt equal to an earlier one is shown as
//! `r5(=r2)`, because two deliveries must never share a receipt. Run with `UPDATE_EXPECT=1` to
//! rewrite the snapshots, then read the diff: a snapshot is a claim about DESIGN.md §3.
//!
//! The language (`name=value` options may come in any order):
//!
//! ```text
//! create Q [vis=MS] [dlq=D:N] [retention=MS] [delay=MS] [max_bytes=N] [tag=K:V]
//!          [fifo] [dedup=content] [scope=queue|group] [window=MS]
//! set Q [vis=MS] [dlq=D:N|dlq=none] [retention=MS] [delay=MS] [dedup=content|off] [window=MS]
//! delete Q | purge Q | stats Q | peek Q
//! dedup Q                                                    the FIFO dedup records on disk
//! send Q [body=TEXT | size=N] [prio=P] [delay=MS | at=T] [count=N] [group=G] [dedup=ID]
//! recv Q [max=N] [vis=MS] [brief]
//! ack Q R… | vis Q R MS [lenient] | nack Q R [delay=MS] [err=TEXT]
//! move FROM [to=Q] [max=N]                                   redrive
//! advance MS                                                 clock forward, then tick
//! clock MS                                                   clock forward, no tick (a lagging timer)
//! restart                                                    rebuild from the effects "disk"
//! crash MS                                                   down for MS, then restart
//! ```
//!
//! FIFO queues: a send shows its sequence number (`m1 seq=1 visible_at=0`), and a send the
//! dedup window swallowed shows the message it matched instead (`dup of m1 seq=1`); it takes no
//! label, so the next new message is still the next `m`. Deliveries and peeks show the group.
//! In `group=` and `dedup=` values, `\0` stands for a NUL byte.

mod common;

use std::collections::BTreeMap;
use std::fmt::Write;

use common::Disk;
use expect_test::{Expect, expect};
use sluice_core::attributes::DedupScope;
use sluice_core::broker::MoveOutcome;
use sluice_core::{
    Broker, BrokerError, DeadLetter, EntryError, MessageId, MessageMeta, NewMessage, QueueAttributes,
    QueueAttributesPatch, QueueId, Receipt, TimeMs,
};

/// Runs `script` from time 0 on an empty broker and compares the trace with `expect`.
/// After every operation the broker's own invariants are checked and its effects are written
/// to the disk that `restart` reads.
fn check(script: &str, expect: Expect) {
    let mut run = Run { broker: Broker::new(), ..Run::default() };
    for line in script.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        writeln!(run.out, "{line}").unwrap();
        run.step(line);
        run.broker.check_invariants(run.now);
        let effects = run.broker.take_effects();
        run.disk.apply(effects);
    }
    expect.assert_eq(&run.out);
}

#[derive(Default)]
struct Run {
    broker: Broker,
    disk: Disk,
    now: TimeMs,
    receipts: Vec<Receipt>,
    /// Which message got each sequence number, to show one handed out twice.
    seqs: BTreeMap<u64, MessageId>,
    sent: u128,
    out: String,
}

/// One script line: the command, its positional words and its `name=value` options.
struct Line<'a> {
    words: Vec<&'a str>,
    opts: BTreeMap<&'a str, &'a str>,
    flags: Vec<&'a str>,
}

impl<'a> Line<'a> {
    fn parse(line: &'a str) -> Line<'a> {
        let mut words = Vec::new();
        let mut opts = BTreeMap::new();
        let mut flags = Vec::new();
        for token in line.split_whitespace() {
            match token.split_once('=') {
                Some((k, v)) => {
                    opts.insert(k, v);
                }
                None if matches!(token, "brief" | "lenient" | "fifo") => flags.push(token),
                None => words.push(token),
            }
        }
        Line { words, opts, flags }
    }

    fn word(&self, i: usize) -> &'a str {
        self.words.get(i).copied().unwrap_or_else(|| panic!("script: word {i} missing in {:?}", self.words))
    }

    fn num(&self, i: usize) -> u64 {
        self.word(i).parse().unwrap_or_else(|_| panic!("script: {:?} is not a number", self.word(i)))
    }

    fn opt<T: std::str::FromStr>(&self, key: &str) -> Option<T> {
        self.opts.get(key).map(|v| v.parse().unwrap_or_else(|_| panic!("script: bad value {key}={v}")))
    }

    /// Fails on options the command does not know, so a typo cannot silently test nothing.
    fn only(&self, keys: &[&str]) {
        for k in self.opts.keys() {
            assert!(keys.contains(k), "script: unknown option {k}= for {:?}", self.words[0]);
        }
    }
}

fn dead_letter(spec: &str) -> DeadLetter {
    let (queue, max) = spec.split_once(':').expect("script: dlq=QUEUE:MAX_RECEIVE_COUNT");
    DeadLetter { queue: queue.to_string(), max_receive_count: max.parse().expect("script: max receive count") }
}

fn broker_error(e: &BrokerError) -> String {
    match e {
        BrokerError::Invalid(v) => format!("error Invalid({})", v.field),
        other => format!("error {other:?}"),
    }
}

fn entry_error(e: &EntryError) -> String {
    match e {
        EntryError::Invalid(v) => format!("error Invalid({})", v.field),
        EntryError::MessageTooLarge { size_bytes, max_bytes } => {
            format!("error MessageTooLarge({size_bytes} > {max_bytes})")
        }
        other => format!("error {other:?}"),
    }
}

fn label(id: MessageId) -> String {
    format!("m{}", id.0)
}

fn show_body(body: Option<&Vec<u8>>) -> String {
    match body {
        None => "<missing>".to_string(),
        Some(b) if b.len() <= 16 => String::from_utf8_lossy(b).into_owned(),
        Some(b) => format!("<{} bytes>", b.len()),
    }
}

/// The fields of a message's metadata a reader needs, in a fixed order; absent ones omitted.
fn show_meta(meta: &MessageMeta) -> String {
    let mut s = format!("count={} prio={}", meta.receive_count, meta.priority);
    if let Some(t) = meta.first_received_at {
        write!(s, " first={t}").unwrap();
    }
    if let Some(src) = &meta.dead_letter_source {
        write!(s, " from={src}").unwrap();
    }
    if let Some(e) = &meta.last_error {
        write!(s, " err={e}").unwrap();
    }
    if let Some(g) = &meta.group_id {
        write!(s, " group={}", printable(g)).unwrap();
    }
    s
}

/// `\0` in a script value stands for a NUL byte, which a script line cannot hold.
fn unescape(value: &str) -> String {
    value.replace("\\0", "\0")
}

/// The inverse of `unescape`, for the trace.
fn printable(value: &str) -> String {
    value.replace('\0', "\\0")
}

/// A dedup key as stored, for the trace: printable, with a content hash (64 hex digits)
/// shortened to `sha:` and its first 8. The key is part of the on-disk format, so a change to
/// how it is built shows up here.
fn show_dedup_key(key: &str) -> String {
    let key = printable(key);
    match key
        .char_indices()
        .find(|&(i, _)| key[i..].len() >= 64 && key[i..i + 64].bytes().all(|b| b.is_ascii_hexdigit()))
    {
        Some((i, _)) => format!("{}sha:{}{}", &key[..i], &key[i..i + 8], &key[i + 64..]),
        None => key,
    }
}

impl Run {
    fn say(&mut self, text: impl AsRef<str>) {
        writeln!(self.out, "  {}", text.as_ref()).unwrap();
    }

    fn queue(&mut self, name: &str) -> Option<QueueId> {
        match self.broker.queue_id(name) {
            Ok(id) => Some(id),
            Err(e) => {
                let text = broker_error(&e);
                self.say(text);
                None
            }
        }
    }

    fn receipt(&self, label: &str) -> Receipt {
        let n: usize = label.strip_prefix('r').and_then(|n| n.parse().ok()).expect("script: receipts are r1, r2, …");
        self.receipts[n - 1]
    }

    /// Records a new receipt and returns its label, flagging one equal to an earlier receipt.
    fn new_receipt(&mut self, receipt: Receipt) -> String {
        let same = self.receipts.iter().position(|r| *r == receipt);
        self.receipts.push(receipt);
        let label = format!("r{}", self.receipts.len());
        match same {
            Some(i) => format!("{label}(=r{})", i + 1),
            None => label,
        }
    }

    fn step(&mut self, text: &str) {
        let line = Line::parse(text);
        match line.word(0) {
            "create" => self.create(&line),
            "set" => self.set(&line),
            "delete" => {
                let r = self.broker.delete_queue(line.word(1));
                self.say(r.map_or_else(|e| broker_error(&e), |()| "deleted".to_string()));
            }
            "purge" => {
                let r = self.broker.purge_queue(line.word(1));
                self.say(r.map_or_else(|e| broker_error(&e), |n| format!("purged {n}")));
            }
            "stats" => self.stats(&line),
            "peek" => self.peek(&line),
            "dedup" => self.dedup(&line),
            "send" => self.send(&line),
            "recv" => self.recv(&line),
            "ack" => self.ack(&line),
            "vis" => {
                line.only(&[]);
                let Some(id) = self.queue(line.word(1)) else { return };
                let receipt = self.receipt(line.word(2));
                let r = if line.flags.contains(&"lenient") {
                    self.broker.change_visibility_lenient(id, &receipt, line.num(3), self.now)
                } else {
                    self.broker.change_visibility(id, &receipt, line.num(3), self.now)
                };
                self.say(r.map_or_else(|e| entry_error(&e), |()| "ok".to_string()));
            }
            "nack" => {
                line.only(&["delay", "err"]);
                let Some(id) = self.queue(line.word(1)) else { return };
                let receipt = self.receipt(line.word(2));
                let delay = line.opt("delay").unwrap_or(0);
                let err = line.opt::<String>("err");
                let r = self.broker.nack(id, &receipt, delay, err, self.now);
                self.say(r.map_or_else(|e| entry_error(&e), |()| "ok".to_string()));
            }
            "move" => {
                line.only(&["to", "max"]);
                let to: Option<String> = line.opt("to");
                let max = line.opt("max").unwrap_or(u64::MAX);
                match self.broker.move_messages(line.word(1), to.as_deref(), max, self.now) {
                    Ok(MoveOutcome { moved, failed, remaining_visible }) => {
                        self.say(format!("moved={moved} failed={failed} remaining_visible={remaining_visible}"))
                    }
                    Err(e) => self.say(broker_error(&e)),
                }
            }
            "advance" => {
                self.now += line.num(1);
                self.broker.tick(self.now);
                self.say(format!("now={}", self.now));
            }
            "clock" => {
                self.now += line.num(1);
                self.say(format!("now={} (timers not run)", self.now));
            }
            "restart" => self.restart(),
            "crash" => {
                // Down for a while: the clock runs on while no tick happens, as after kill -9.
                self.now += line.num(1);
                self.say(format!("down until now={}", self.now));
                self.restart();
            }
            other => panic!("script: unknown command {other:?}"),
        }
    }

    fn create(&mut self, line: &Line) {
        line.only(&["vis", "dlq", "retention", "delay", "max_bytes", "tag", "dedup", "scope", "window"]);
        let mut attributes = QueueAttributes { fifo: line.flags.contains(&"fifo"), ..QueueAttributes::default() };
        match line.opt::<String>("dedup").as_deref() {
            None => {}
            Some("content") => attributes.content_based_dedup = true,
            Some(other) => panic!("script: dedup=content, not {other:?}"),
        }
        match line.opt::<String>("scope").as_deref() {
            None | Some("queue") => {}
            Some("group") => attributes.dedup_scope = DedupScope::MessageGroup,
            Some(other) => panic!("script: scope=queue|group, not {other:?}"),
        }
        if let Some(v) = line.opt("window") {
            attributes.dedup_window_ms = v;
        }
        if let Some(v) = line.opt("vis") {
            attributes.visibility_timeout_ms = v;
        }
        if let Some(v) = line.opt::<String>("dlq") {
            attributes.dead_letter = Some(dead_letter(&v));
        }
        if let Some(v) = line.opt("retention") {
            attributes.retention_ms = v;
        }
        if let Some(v) = line.opt("delay") {
            attributes.delay_ms = v;
        }
        if let Some(v) = line.opt("max_bytes") {
            attributes.message_bytes_max = v;
        }
        if let Some(v) = line.opt::<String>("tag") {
            let (k, v) = v.split_once(':').expect("script: tag=KEY:VALUE");
            attributes.tags.insert(k.to_string(), v.to_string());
        }
        match self.broker.create_queue(line.word(1), attributes, self.now) {
            Ok((id, true)) => self.say(format!("created id={id}")),
            Ok((id, false)) => self.say(format!("exists id={id}")),
            Err(e) => self.say(broker_error(&e)),
        }
    }

    fn set(&mut self, line: &Line) {
        line.only(&["vis", "dlq", "retention", "delay", "dedup", "window"]);
        let content_based_dedup = line.opt::<String>("dedup").map(|v| match v.as_str() {
            "content" => true,
            "off" => false,
            other => panic!("script: dedup=content|off, not {other:?}"),
        });
        let patch = QueueAttributesPatch {
            visibility_timeout_ms: line.opt("vis"),
            retention_ms: line.opt("retention"),
            delay_ms: line.opt("delay"),
            content_based_dedup,
            dedup_window_ms: line.opt("window"),
            dead_letter: line.opt::<String>("dlq").map(|v| (v != "none").then(|| dead_letter(&v))),
            ..Default::default()
        };
        let r = self.broker.update_queue(line.word(1), &patch, self.now);
        self.say(r.map_or_else(|e| broker_error(&e), |id| format!("updated id={id}")));
    }

    fn stats(&mut self, line: &Line) {
        let Some(id) = self.queue(line.word(1)) else { return };
        let s = self.broker.queue_view(id, self.now).expect("queue exists").stats;
        let age = s.oldest_age_ms.map_or("-".to_string(), |a| a.to_string());
        let dlq = s.dead_letter_depth.map_or("-".to_string(), |a| a.to_string());
        self.say(format!(
            "visible={} in_flight={} delayed={} oldest_age_ms={age} dlq_depth={dlq}",
            s.visible, s.in_flight, s.delayed
        ));
    }

    fn peek(&mut self, line: &Line) {
        let Some(id) = self.queue(line.word(1)) else { return };
        let rows = self.broker.peek(id, 1000, self.now);
        if rows.is_empty() {
            self.say("(empty)");
        }
        for (seq, meta, state) in rows {
            let body = show_body(self.disk.bodies.get(&seq));
            self.say(format!("{} {state:?} body={body} sent={} {}", label(meta.id), meta.sent_at, show_meta(&meta)));
        }
    }

    fn dedup(&mut self, line: &Line) {
        line.only(&[]);
        let Some(id) = self.queue(line.word(1)) else { return };
        let rows: Vec<String> = self
            .disk
            .dedup
            .range((id, String::new())..(id + 1, String::new()))
            .map(|((_, key), e)| {
                format!("{} -> {} seq={} expires={}", show_dedup_key(key), label(e.id), e.seq, e.expires_at)
            })
            .collect();
        if rows.is_empty() {
            self.say("(none)");
        }
        for row in rows {
            self.say(row);
        }
    }

    fn send(&mut self, line: &Line) {
        line.only(&["body", "size", "prio", "delay", "at", "count", "group", "dedup"]);
        let Some(id) = self.queue(line.word(1)) else { return };
        let fifo = self.broker.queue_view(id, self.now).expect("queue exists").attributes.fifo;
        let body = match (line.opt::<String>("body"), line.opt::<usize>("size")) {
            (Some(b), None) => b.into_bytes(),
            (None, Some(n)) => vec![b'x'; n],
            (None, None) => Vec::new(),
            (Some(_), Some(_)) => panic!("script: body= or size=, not both"),
        };
        let mut message = NewMessage {
            body,
            priority: line.opt("prio").unwrap_or(0),
            delay_ms: line.opt("delay"),
            deliver_at_ms: line.opt("at"),
            dedup_id: line.opt::<String>("dedup").map(|v| unescape(&v)),
            ..Default::default()
        };
        message.envelope.group_id = line.opt::<String>("group").map(|v| unescape(&v));
        let count: u32 = line.opt("count").unwrap_or(1);
        let mut accepted = Vec::new();
        for _ in 0..count {
            let message_id = MessageId(self.sent + 1);
            match self.broker.send(id, &message, message_id, self.now) {
                Ok(sent) if sent.duplicate => {
                    // Nothing was enqueued, so no body is written: the store must not either.
                    if self.seqs.get(&sent.seq) != Some(&sent.id) {
                        self.say(format!("dup answer names seq {} which was not {}", sent.seq, label(sent.id)));
                    }
                    self.say(format!("dup of {} seq={}", label(sent.id), sent.seq));
                }
                Ok(sent) => {
                    let seq = sent.seq;
                    self.sent += 1;
                    if sent.id != message_id {
                        self.say(format!("{} came back as {}", label(message_id), label(sent.id)));
                    }
                    if let Some((&last, _)) = self.seqs.last_key_value()
                        && seq < last
                    {
                        self.say(format!("{} got seq {seq}, below an earlier message's {last}", label(message_id)));
                    }
                    self.disk.put_body(seq, &message.body);
                    if let Some(earlier) = self.seqs.insert(seq, message_id) {
                        self.say(format!("{} reuses the sequence number of {}", label(message_id), label(earlier)));
                    }
                    accepted.push((message_id, seq, self.broker.message(seq).expect("just sent").visible_at));
                }
                Err(e) => {
                    let text = entry_error(&e);
                    self.say(text);
                }
            }
        }
        let seq = |seq: u64| if fifo { format!(" seq={seq}") } else { String::new() };
        match accepted.as_slice() {
            [] => {}
            [(m, s, at)] => self.say(format!("{}{} visible_at={at}", label(*m), seq(*s))),
            [(m1, _, _), .., (m2, _, _)] => self.say(format!("{}..{}", label(*m1), label(*m2))),
        }
    }

    fn recv(&mut self, line: &Line) {
        line.only(&["max", "vis"]);
        let Some(id) = self.queue(line.word(1)) else { return };
        let max = line.opt("max").unwrap_or(1);
        let deliveries = self.broker.receive(id, max, line.opt("vis"), self.now);
        if deliveries.is_empty() {
            self.say("(nothing)");
        }
        if line.flags.contains(&"brief") {
            let bytes: u64 = deliveries.iter().map(|d| d.meta.size_bytes).sum();
            let labels: Vec<String> = deliveries.iter().map(|d| label(d.meta.id)).collect();
            for d in &deliveries {
                self.receipts.push(d.receipt);
            }
            self.say(format!("{} messages, {bytes} bytes: {}", deliveries.len(), labels.join(" ")));
            return;
        }
        for d in deliveries {
            assert_eq!(d.receipt.seq, d.seq, "receipt names the delivered message");
            let r = self.new_receipt(d.receipt);
            let body = show_body(self.disk.bodies.get(&d.seq));
            self.say(format!(
                "{} {r} body={body} until={} {}",
                label(d.meta.id),
                d.meta.visible_at,
                show_meta(&d.meta)
            ));
        }
    }

    fn ack(&mut self, line: &Line) {
        line.only(&[]);
        let Some(id) = self.queue(line.word(1)) else { return };
        let labels = &line.words[2..];
        for l in labels {
            let r = self.broker.ack(id, &self.receipt(l), self.now);
            let text = r.map_or_else(|e| entry_error(&e), |()| "ok".to_string());
            if labels.len() == 1 { self.say(text) } else { self.say(format!("{l}: {text}")) }
        }
    }

    fn restart(&mut self) {
        self.broker = self.disk.restore(self.now);
        self.say(format!("restored {} queues, {} messages", self.broker.queue_count(), self.broker.message_count()));
    }
}

// ----- delivery order ----------------------------------------------------------------------

#[test]
fn priority_first_then_send_order() {
    check(
        r#"
        create q
        send q body=a
        send q body=b prio=5
        send q body=c
        send q body=d prio=5
        send q body=e prio=9
        recv q max=10
        stats q
        "#,
        expect![[r#"
            create q
              created id=1
            send q body=a
              m1 visible_at=0
            send q body=b prio=5
              m2 visible_at=0
            send q body=c
              m3 visible_at=0
            send q body=d prio=5
              m4 visible_at=0
            send q body=e prio=9
              m5 visible_at=0
            recv q max=10
              m5 r1 body=e until=30000 count=1 prio=9 first=0
              m2 r2 body=b until=30000 count=1 prio=5 first=0
              m4 r3 body=d until=30000 count=1 prio=5 first=0
              m1 r4 body=a until=30000 count=1 prio=0 first=0
              m3 r5 body=c until=30000 count=1 prio=0 first=0
            stats q
              visible=0 in_flight=5 delayed=0 oldest_age_ms=0 dlq_depth=-
        "#]],
    );
}

#[test]
fn receive_max_and_empty_queue() {
    check(
        r#"
        create q
        recv q max=5
        send q body=a
        send q body=b
        send q body=c
        recv q max=2
        recv q max=2
        recv q max=2
        stats q
        "#,
        expect![[r#"
            create q
              created id=1
            recv q max=5
              (nothing)
            send q body=a
              m1 visible_at=0
            send q body=b
              m2 visible_at=0
            send q body=c
              m3 visible_at=0
            recv q max=2
              m1 r1 body=a until=30000 count=1 prio=0 first=0
              m2 r2 body=b until=30000 count=1 prio=0 first=0
            recv q max=2
              m3 r3 body=c until=30000 count=1 prio=0 first=0
            recv q max=2
              (nothing)
            stats q
              visible=0 in_flight=3 delayed=0 oldest_age_ms=0 dlq_depth=-
        "#]],
    );
}

// ----- delays ------------------------------------------------------------------------------

#[test]
fn delay_is_never_early_and_exact_at_its_time() {
    check(
        r#"
        create q
        send q body=late delay=1000
        send q body=now
        stats q
        recv q max=10
        advance 999
        recv q
        stats q
        advance 1
        stats q
        recv q
        "#,
        expect![[r#"
            create q
              created id=1
            send q body=late delay=1000
              m1 visible_at=1000
            send q body=now
              m2 visible_at=0
            stats q
              visible=1 in_flight=0 delayed=1 oldest_age_ms=0 dlq_depth=-
            recv q max=10
              m2 r1 body=now until=30000 count=1 prio=0 first=0
            advance 999
              now=999
            recv q
              (nothing)
            stats q
              visible=0 in_flight=1 delayed=1 oldest_age_ms=999 dlq_depth=-
            advance 1
              now=1000
            stats q
              visible=1 in_flight=1 delayed=0 oldest_age_ms=1000 dlq_depth=-
            recv q
              m1 r2 body=late until=31000 count=1 prio=0 first=1000
        "#]],
    );
}

#[test]
fn deliver_at_and_queue_default_delay() {
    check(
        r#"
        create q delay=500
        send q body=default
        send q body=none delay=0
        send q body=at at=200
        send q body=past at=0
        advance 100
        recv q max=10
        advance 100
        recv q max=10
        advance 299
        recv q max=10
        advance 1
        recv q max=10
        "#,
        expect![[r#"
            create q delay=500
              created id=1
            send q body=default
              m1 visible_at=500
            send q body=none delay=0
              m2 visible_at=0
            send q body=at at=200
              m3 visible_at=200
            send q body=past at=0
              m4 visible_at=0
            advance 100
              now=100
            recv q max=10
              m2 r1 body=none until=30100 count=1 prio=0 first=100
              m4 r2 body=past until=30100 count=1 prio=0 first=100
            advance 100
              now=200
            recv q max=10
              m3 r3 body=at until=30200 count=1 prio=0 first=200
            advance 299
              now=499
            recv q max=10
              (nothing)
            advance 1
              now=500
            recv q max=10
              m1 r4 body=default until=30500 count=1 prio=0 first=500
        "#]],
    );
}

#[test]
fn delay_must_end_within_retention() {
    check(
        r#"
        create q retention=60000
        send q body=a delay=60000
        send q body=b delay=59999
        stats q
        "#,
        expect![[r#"
            create q retention=60000
              created id=1
            send q body=a delay=60000
              error Invalid(delay_ms)
            send q body=b delay=59999
              m1 visible_at=59999
            stats q
              visible=0 in_flight=0 delayed=1 oldest_age_ms=0 dlq_depth=-
        "#]],
    );
}

// ----- visibility --------------------------------------------------------------------------

#[test]
fn visibility_expiry_redelivers_with_new_receipt() {
    check(
        r#"
        create q vis=1000
        send q body=a
        recv q
        advance 999
        recv q
        stats q
        advance 1
        stats q
        recv q
        # r1 belongs to the first delivery: it must not touch the second one.
        ack q r1
        vis q r1 5000
        nack q r1
        peek q
        ack q r2
        stats q
        "#,
        expect![[r#"
            create q vis=1000
              created id=1
            send q body=a
              m1 visible_at=0
            recv q
              m1 r1 body=a until=1000 count=1 prio=0 first=0
            advance 999
              now=999
            recv q
              (nothing)
            stats q
              visible=0 in_flight=1 delayed=0 oldest_age_ms=999 dlq_depth=-
            advance 1
              now=1000
            stats q
              visible=1 in_flight=0 delayed=0 oldest_age_ms=1000 dlq_depth=-
            recv q
              m1 r2 body=a until=2000 count=2 prio=0 first=0
            ack q r1
              error StaleReceipt
            vis q r1 5000
              error StaleReceipt
            nack q r1
              error StaleReceipt
            peek q
              m1 InFlight body=a sent=0 count=2 prio=0 first=0
            ack q r2
              ok
            stats q
              visible=0 in_flight=0 delayed=0 oldest_age_ms=- dlq_depth=-
        "#]],
    );
}

#[test]
fn ack_after_expiry_but_before_redelivery_works() {
    check(
        r#"
        create q vis=1000
        send q body=a
        recv q
        advance 5000
        stats q
        # Expired, so it can no longer be extended or nacked...
        vis q r1 1000
        nack q r1
        # ...but, as in SQS, it can still be deleted while nobody else received it.
        ack q r1
        stats q
        ack q r1
        "#,
        expect![[r#"
            create q vis=1000
              created id=1
            send q body=a
              m1 visible_at=0
            recv q
              m1 r1 body=a until=1000 count=1 prio=0 first=0
            advance 5000
              now=5000
            stats q
              visible=1 in_flight=0 delayed=0 oldest_age_ms=5000 dlq_depth=-
            vis q r1 1000
              error NotInFlight
            nack q r1
              error NotInFlight
            ack q r1
              ok
            stats q
              visible=0 in_flight=0 delayed=0 oldest_age_ms=- dlq_depth=-
            ack q r1
              error StaleReceipt
        "#]],
    );
}

#[test]
fn extend_visibility_counts_from_now() {
    check(
        r#"
        create q vis=1000
        send q body=a
        recv q
        advance 500
        vis q r1 2000
        advance 1999
        recv q
        stats q
        advance 1
        recv q
        vis q r2 43200001
        "#,
        expect![[r#"
            create q vis=1000
              created id=1
            send q body=a
              m1 visible_at=0
            recv q
              m1 r1 body=a until=1000 count=1 prio=0 first=0
            advance 500
              now=500
            vis q r1 2000
              ok
            advance 1999
              now=2499
            recv q
              (nothing)
            stats q
              visible=0 in_flight=1 delayed=0 oldest_age_ms=2499 dlq_depth=-
            advance 1
              now=2500
            recv q
              m1 r2 body=a until=3500 count=2 prio=0 first=0
            vis q r2 43200001
              error Invalid(timeout_ms)
        "#]],
    );
}

#[test]
fn lenient_visibility_change_for_sqs() {
    // SQS answers success when the hold of the newest delivery has ended but nobody received
    // the message since: the lenient form hides it again; a newer delivery still wins. Once
    // the message is gone, the lenient form says so (SQS answers that with an error, and an
    // older receipt of a message still there with success); the strict form calls both stale.
    check(
        r#"
        create q vis=1000
        send q body=a
        recv q
        advance 1000
        vis q r1 5000
        vis q r1 5000 lenient
        stats q
        recv q
        advance 4999
        recv q
        advance 1
        recv q
        vis q r1 5000 lenient
        vis q r2 0 lenient
        vis q r2 43200001 lenient
        vis q r2 3000 lenient
        stats q
        advance 3000
        vis q r2 0 lenient
        stats q
        recv q
        ack q r3
        vis q r3 5000 lenient
        vis q r2 5000 lenient
        vis q r3 5000
        "#,
        expect![[r#"
            create q vis=1000
              created id=1
            send q body=a
              m1 visible_at=0
            recv q
              m1 r1 body=a until=1000 count=1 prio=0 first=0
            advance 1000
              now=1000
            vis q r1 5000
              error NotInFlight
            vis q r1 5000 lenient
              ok
            stats q
              visible=0 in_flight=1 delayed=0 oldest_age_ms=1000 dlq_depth=-
            recv q
              (nothing)
            advance 4999
              now=5999
            recv q
              (nothing)
            advance 1
              now=6000
            recv q
              m1 r2 body=a until=7000 count=2 prio=0 first=0
            vis q r1 5000 lenient
              error StaleReceipt
            vis q r2 0 lenient
              ok
            vis q r2 43200001 lenient
              error Invalid(timeout_ms)
            vis q r2 3000 lenient
              ok
            stats q
              visible=0 in_flight=1 delayed=0 oldest_age_ms=6000 dlq_depth=-
            advance 3000
              now=9000
            vis q r2 0 lenient
              ok
            stats q
              visible=1 in_flight=0 delayed=0 oldest_age_ms=9000 dlq_depth=-
            recv q
              m1 r3 body=a until=10000 count=3 prio=0 first=0
            ack q r3
              ok
            vis q r3 5000 lenient
              error MessageGone
            vis q r2 5000 lenient
              error MessageGone
            vis q r3 5000
              error StaleReceipt
        "#]],
    );
}

#[test]
fn release_with_zero_visibility() {
    check(
        r#"
        create q
        send q body=a
        recv q
        vis q r1 0
        stats q
        recv q
        # The released receipt is spent: the new delivery is r2's.
        vis q r1 0
        ack q r1
        ack q r2
        stats q
        "#,
        expect![[r#"
            create q
              created id=1
            send q body=a
              m1 visible_at=0
            recv q
              m1 r1 body=a until=30000 count=1 prio=0 first=0
            vis q r1 0
              ok
            stats q
              visible=1 in_flight=0 delayed=0 oldest_age_ms=0 dlq_depth=-
            recv q
              m1 r2 body=a until=30000 count=2 prio=0 first=0
            vis q r1 0
              error StaleReceipt
            ack q r1
              error StaleReceipt
            ack q r2
              ok
            stats q
              visible=0 in_flight=0 delayed=0 oldest_age_ms=- dlq_depth=-
        "#]],
    );
}

#[test]
fn zero_visibility_receive() {
    check(
        r#"
        create q
        send q body=a
        recv q vis=0
        # Never handed out twice by receives at the same instant before the timers run.
        recv q
        vis q r1 1000
        advance 0
        stats q
        recv q vis=0
        advance 0
        ack q r1
        ack q r2
        stats q
        "#,
        expect![[r#"
            create q
              created id=1
            send q body=a
              m1 visible_at=0
            recv q vis=0
              m1 r1 body=a until=0 count=1 prio=0 first=0
            recv q
              (nothing)
            vis q r1 1000
              error NotInFlight
            advance 0
              now=0
            stats q
              visible=1 in_flight=0 delayed=0 oldest_age_ms=0 dlq_depth=-
            recv q vis=0
              m1 r2 body=a until=0 count=2 prio=0 first=0
            advance 0
              now=0
            ack q r1
              error StaleReceipt
            ack q r2
              ok
            stats q
              visible=0 in_flight=0 delayed=0 oldest_age_ms=- dlq_depth=-
        "#]],
    );
}

#[test]
fn nack_with_delay_and_error() {
    check(
        r#"
        create q
        send q body=a
        recv q
        nack q r1 delay=500 err=boom
        stats q
        peek q
        nack q r1
        advance 499
        recv q
        advance 1
        recv q
        nack q r2 err=again
        peek q
        recv q
        nack q r3
        peek q
        "#,
        expect![[r#"
            create q
              created id=1
            send q body=a
              m1 visible_at=0
            recv q
              m1 r1 body=a until=30000 count=1 prio=0 first=0
            nack q r1 delay=500 err=boom
              ok
            stats q
              visible=0 in_flight=0 delayed=1 oldest_age_ms=0 dlq_depth=-
            peek q
              m1 Delayed body=a sent=0 count=1 prio=0 first=0 err=boom
            nack q r1
              error NotInFlight
            advance 499
              now=499
            recv q
              (nothing)
            advance 1
              now=500
            recv q
              m1 r2 body=a until=30500 count=2 prio=0 first=0 err=boom
            nack q r2 err=again
              ok
            peek q
              m1 Visible body=a sent=0 count=2 prio=0 first=0 err=again
            recv q
              m1 r3 body=a until=30500 count=3 prio=0 first=0 err=again
            nack q r3
              ok
            peek q
              m1 Visible body=a sent=0 count=3 prio=0 first=0 err=again
        "#]],
    );
}

#[test]
fn receipts_of_other_queues_are_foreign() {
    check(
        r#"
        create a
        create b
        send a body=x
        recv a
        ack b r1
        vis b r1 0
        nack b r1
        ack nowhere r1
        ack a r1
        "#,
        expect![[r#"
            create a
              created id=1
            create b
              created id=2
            send a body=x
              m1 visible_at=0
            recv a
              m1 r1 body=x until=30000 count=1 prio=0 first=0
            ack b r1
              error ForeignReceipt
            vis b r1 0
              error ForeignReceipt
            nack b r1
              error ForeignReceipt
            ack nowhere r1
              error QueueNotFound("nowhere")
            ack a r1
              ok
        "#]],
    );
}

// ----- dead letters ------------------------------------------------------------------------

#[test]
fn dead_letter_via_visibility_expiry() {
    check(
        r#"
        create d
        create q vis=1000 dlq=d:3
        send q body=a prio=3
        recv q
        advance 1000
        recv q
        nack q r2 err=boom delay=0
        # nack recorded the error but the message had one receive left.
        recv q
        advance 1000
        stats q
        stats d
        peek d
        recv d
        ack q r3
        ack d r4
        "#,
        expect![[r#"
            create d
              created id=1
            create q vis=1000 dlq=d:3
              created id=2
            send q body=a prio=3
              m1 visible_at=0
            recv q
              m1 r1 body=a until=1000 count=1 prio=3 first=0
            advance 1000
              now=1000
            recv q
              m1 r2 body=a until=2000 count=2 prio=3 first=0
            nack q r2 err=boom delay=0
              ok
            recv q
              m1 r3 body=a until=2000 count=3 prio=3 first=0 err=boom
            advance 1000
              now=2000
            stats q
              visible=0 in_flight=0 delayed=0 oldest_age_ms=- dlq_depth=1
            stats d
              visible=1 in_flight=0 delayed=0 oldest_age_ms=2000 dlq_depth=-
            peek d
              m1 Visible body=a sent=0 count=3 prio=3 first=0 from=q err=boom
            recv d
              m1 r4 body=a until=32000 count=4 prio=3 first=0 from=q err=boom
            ack q r3
              error StaleReceipt
            ack d r4
              ok
        "#]],
    );
}

#[test]
fn dead_letter_via_nack() {
    check(
        r#"
        create d
        create q dlq=d:1
        send q body=a
        recv q
        nack q r1 delay=5000 err=bad-input
        stats q
        peek d
        ack q r1
        "#,
        expect![[r#"
            create d
              created id=1
            create q dlq=d:1
              created id=2
            send q body=a
              m1 visible_at=0
            recv q
              m1 r1 body=a until=30000 count=1 prio=0 first=0
            nack q r1 delay=5000 err=bad-input
              ok
            stats q
              visible=0 in_flight=0 delayed=0 oldest_age_ms=- dlq_depth=1
            peek d
              m1 Visible body=a sent=0 count=1 prio=0 first=0 from=q err=bad-input
            ack q r1
              error StaleReceipt
        "#]],
    );
}

#[test]
fn dead_letter_via_release() {
    check(
        r#"
        create d
        create q dlq=d:1
        send q body=a
        recv q
        vis q r1 0
        peek q
        peek d
        "#,
        expect![[r#"
            create d
              created id=1
            create q dlq=d:1
              created id=2
            send q body=a
              m1 visible_at=0
            recv q
              m1 r1 body=a until=30000 count=1 prio=0 first=0
            vis q r1 0
              ok
            peek q
              (empty)
            peek d
              m1 Visible body=a sent=0 count=1 prio=0 first=0 from=q
        "#]],
    );
}

#[test]
fn dead_letter_queue_missing_means_no_move_until_it_exists() {
    check(
        r#"
        create d
        create q vis=1000 dlq=d:1
        delete d
        send q body=a
        recv q
        advance 1000
        # No dead-letter queue: the message stays and keeps its count.
        stats q
        recv q
        advance 1000
        peek q
        create d
        stats q
        # Now the receive finds it over the limit and moves it instead of delivering it.
        recv q
        stats q
        peek d
        "#,
        expect![[r#"
            create d
              created id=1
            create q vis=1000 dlq=d:1
              created id=2
            delete d
              deleted
            send q body=a
              m1 visible_at=0
            recv q
              m1 r1 body=a until=1000 count=1 prio=0 first=0
            advance 1000
              now=1000
            stats q
              visible=1 in_flight=0 delayed=0 oldest_age_ms=1000 dlq_depth=-
            recv q
              m1 r2 body=a until=2000 count=2 prio=0 first=0
            advance 1000
              now=2000
            peek q
              m1 Visible body=a sent=0 count=2 prio=0 first=0
            create d
              created id=3
            stats q
              visible=1 in_flight=0 delayed=0 oldest_age_ms=2000 dlq_depth=0
            recv q
              (nothing)
            stats q
              visible=0 in_flight=0 delayed=0 oldest_age_ms=- dlq_depth=1
            peek d
              m1 Visible body=a sent=0 count=2 prio=0 first=0 from=q
        "#]],
    );
}

#[test]
fn dead_letter_via_receive_after_limit_lowered() {
    check(
        r#"
        create d
        create q vis=1000 dlq=d:5
        send q body=a
        send q body=b
        recv q
        advance 1000
        set q dlq=d:1
        recv q max=10
        peek d
        "#,
        expect![[r#"
            create d
              created id=1
            create q vis=1000 dlq=d:5
              created id=2
            send q body=a
              m1 visible_at=0
            send q body=b
              m2 visible_at=0
            recv q
              m1 r1 body=a until=1000 count=1 prio=0 first=0
            advance 1000
              now=1000
            set q dlq=d:1
              updated id=2
            recv q max=10
              m2 r2 body=b until=2000 count=1 prio=0 first=1000
            peek d
              m1 Visible body=a sent=0 count=1 prio=0 first=0 from=q
        "#]],
    );
}

#[test]
fn redrive_back_to_source_resets_receive_count() {
    check(
        r#"
        create d
        create q vis=1000 dlq=d:1
        create other
        send q body=a
        send q body=b
        send other body=c
        recv q max=2
        recv other vis=1000
        nack q r1 err=first
        advance 1000
        stats d
        peek d
        move d
        stats d
        peek q
        recv q max=2
        "#,
        expect![[r#"
            create d
              created id=1
            create q vis=1000 dlq=d:1
              created id=2
            create other
              created id=3
            send q body=a
              m1 visible_at=0
            send q body=b
              m2 visible_at=0
            send other body=c
              m3 visible_at=0
            recv q max=2
              m1 r1 body=a until=1000 count=1 prio=0 first=0
              m2 r2 body=b until=1000 count=1 prio=0 first=0
            recv other vis=1000
              m3 r3 body=c until=1000 count=1 prio=0 first=0
            nack q r1 err=first
              ok
            advance 1000
              now=1000
            stats d
              visible=2 in_flight=0 delayed=0 oldest_age_ms=1000 dlq_depth=-
            peek d
              m1 Visible body=a sent=0 count=1 prio=0 first=0 from=q err=first
              m2 Visible body=b sent=0 count=1 prio=0 first=0 from=q
            move d
              moved=2 failed=0 remaining_visible=0
            stats d
              visible=0 in_flight=0 delayed=0 oldest_age_ms=- dlq_depth=-
            peek q
              m1 Visible body=a sent=0 count=0 prio=0 first=0 err=first
              m2 Visible body=b sent=0 count=0 prio=0 first=0
            recv q max=2
              m1 r4 body=a until=2000 count=1 prio=0 first=0 err=first
              m2 r5 body=b until=2000 count=1 prio=0 first=0
        "#]],
    );
}

#[test]
fn redrive_to_named_queue_and_at_a_rate() {
    check(
        r#"
        create d
        create q dlq=d:1
        create elsewhere
        send q body=a
        send q body=b
        send q body=c
        recv q max=3
        nack q r1
        nack q r2
        nack q r3
        move d to=elsewhere max=2
        peek elsewhere
        move d to=d
        move d to=nowhere
        move nowhere
        delete q
        # The source is gone: the last message has nowhere to go back to.
        move d
        stats d
        "#,
        expect![[r#"
            create d
              created id=1
            create q dlq=d:1
              created id=2
            create elsewhere
              created id=3
            send q body=a
              m1 visible_at=0
            send q body=b
              m2 visible_at=0
            send q body=c
              m3 visible_at=0
            recv q max=3
              m1 r1 body=a until=30000 count=1 prio=0 first=0
              m2 r2 body=b until=30000 count=1 prio=0 first=0
              m3 r3 body=c until=30000 count=1 prio=0 first=0
            nack q r1
              ok
            nack q r2
              ok
            nack q r3
              ok
            move d to=elsewhere max=2
              moved=2 failed=0 remaining_visible=1
            peek elsewhere
              m1 Visible body=a sent=0 count=0 prio=0 first=0
              m2 Visible body=b sent=0 count=0 prio=0 first=0
            move d to=d
              moved=0 failed=1 remaining_visible=1
            move d to=nowhere
              error QueueNotFound("nowhere")
            move nowhere
              error QueueNotFound("nowhere")
            delete q
              deleted
            move d
              moved=0 failed=1 remaining_visible=1
            stats d
              visible=1 in_flight=0 delayed=0 oldest_age_ms=0 dlq_depth=-
        "#]],
    );
}

#[test]
fn redrive_only_moves_visible_messages() {
    check(
        r#"
        create d
        create q dlq=d:1
        send q body=a
        send q body=b
        recv q max=2
        nack q r1
        nack q r2
        recv d vis=1000
        move d
        stats d
        advance 1000
        move d
        stats d
        "#,
        expect![[r#"
            create d
              created id=1
            create q dlq=d:1
              created id=2
            send q body=a
              m1 visible_at=0
            send q body=b
              m2 visible_at=0
            recv q max=2
              m1 r1 body=a until=30000 count=1 prio=0 first=0
              m2 r2 body=b until=30000 count=1 prio=0 first=0
            nack q r1
              ok
            nack q r2
              ok
            recv d vis=1000
              m1 r3 body=a until=1000 count=2 prio=0 first=0 from=q
            move d
              moved=1 failed=0 remaining_visible=0
            stats d
              visible=0 in_flight=1 delayed=0 oldest_age_ms=0 dlq_depth=-
            advance 1000
              now=1000
            move d
              moved=1 failed=0 remaining_visible=0
            stats d
              visible=0 in_flight=0 delayed=0 oldest_age_ms=- dlq_depth=-
        "#]],
    );
}

#[test]
fn receipt_from_before_dead_lettering_is_stale_after_redrive() {
    // DESIGN §3.3 and `EntryError::StaleReceipt` ("acked, moved or received again since"): a
    // receipt from before a move must not act on the message after it comes back.
    check(
        r#"
        create d
        create q vis=1000 dlq=d:1
        send q body=a
        recv q
        advance 1000
        move d
        ack q r1
        stats q
        "#,
        expect![[r#"
            create d
              created id=1
            create q vis=1000 dlq=d:1
              created id=2
            send q body=a
              m1 visible_at=0
            recv q
              m1 r1 body=a until=1000 count=1 prio=0 first=0
            advance 1000
              now=1000
            move d
              moved=1 failed=0 remaining_visible=0
            ack q r1
              error StaleReceipt
            stats q
              visible=1 in_flight=0 delayed=0 oldest_age_ms=1000 dlq_depth=0
        "#]],
    );
}

#[test]
fn dead_letter_queue_with_its_own_policy() {
    // The receive count a message earned in its source comes along into the DLQ, so a DLQ
    // with a lower limit of its own passes it straight on without delivering it.
    check(
        r#"
        create e
        create d dlq=e:2
        create q vis=1000 dlq=d:3
        send q body=a
        recv q
        nack q r1
        recv q
        nack q r2
        recv q
        nack q r3
        peek d
        recv d
        peek e
        "#,
        expect![[r#"
            create e
              created id=1
            create d dlq=e:2
              created id=2
            create q vis=1000 dlq=d:3
              created id=3
            send q body=a
              m1 visible_at=0
            recv q
              m1 r1 body=a until=1000 count=1 prio=0 first=0
            nack q r1
              ok
            recv q
              m1 r2 body=a until=1000 count=2 prio=0 first=0
            nack q r2
              ok
            recv q
              m1 r3 body=a until=1000 count=3 prio=0 first=0
            nack q r3
              ok
            peek d
              m1 Visible body=a sent=0 count=3 prio=0 first=0 from=q
            recv d
              (nothing)
            peek e
              m1 Visible body=a sent=0 count=3 prio=0 first=0 from=d
        "#]],
    );
}

// ----- retention, purge, delete ------------------------------------------------------------

#[test]
fn retention_deletes_old_messages_even_in_flight() {
    check(
        r#"
        create q retention=60000 vis=100000
        send q body=old
        advance 30000
        send q body=young
        recv q
        stats q
        advance 29999
        stats q
        advance 1
        stats q
        peek q
        ack q r1
        advance 30000
        stats q
        "#,
        expect![[r#"
            create q retention=60000 vis=100000
              created id=1
            send q body=old
              m1 visible_at=0
            advance 30000
              now=30000
            send q body=young
              m2 visible_at=30000
            recv q
              m1 r1 body=old until=130000 count=1 prio=0 first=30000
            stats q
              visible=1 in_flight=1 delayed=0 oldest_age_ms=30000 dlq_depth=-
            advance 29999
              now=59999
            stats q
              visible=1 in_flight=1 delayed=0 oldest_age_ms=59999 dlq_depth=-
            advance 1
              now=60000
            stats q
              visible=1 in_flight=0 delayed=0 oldest_age_ms=30000 dlq_depth=-
            peek q
              m2 Visible body=young sent=30000 count=0 prio=0
            ack q r1
              error StaleReceipt
            advance 30000
              now=90000
            stats q
              visible=0 in_flight=0 delayed=0 oldest_age_ms=- dlq_depth=-
        "#]],
    );
}

#[test]
fn purge_removes_everything() {
    check(
        r#"
        create q
        send q body=a
        send q body=b delay=1000
        send q body=c
        recv q
        purge q
        stats q
        ack q r1
        purge q
        purge nowhere
        "#,
        expect![[r#"
            create q
              created id=1
            send q body=a
              m1 visible_at=0
            send q body=b delay=1000
              m2 visible_at=1000
            send q body=c
              m3 visible_at=0
            recv q
              m1 r1 body=a until=30000 count=1 prio=0 first=0
            purge q
              purged 3
            stats q
              visible=0 in_flight=0 delayed=0 oldest_age_ms=- dlq_depth=-
            ack q r1
              error StaleReceipt
            purge q
              purged 0
            purge nowhere
              error QueueNotFound("nowhere")
        "#]],
    );
}

#[test]
fn recreated_queue_refuses_receipts_of_the_old_one() {
    check(
        r#"
        create q
        send q body=a
        recv q
        delete q
        ack q r1
        create q
        send q body=b
        ack q r1
        recv q
        ack q r2
        "#,
        expect![[r#"
            create q
              created id=1
            send q body=a
              m1 visible_at=0
            recv q
              m1 r1 body=a until=30000 count=1 prio=0 first=0
            delete q
              deleted
            ack q r1
              error QueueNotFound("q")
            create q
              created id=2
            send q body=b
              m2 visible_at=0
            ack q r1
              error ForeignReceipt
            recv q
              m2 r2 body=b until=30000 count=1 prio=0 first=0
            ack q r2
              ok
        "#]],
    );
}

#[test]
fn recreated_queue_refuses_receipts_of_the_old_one_across_restart() {
    // Queue ids and sequence numbers must not be handed out twice, even when the records that
    // used them were deleted before a restart: receipts are built from them.
    check(
        r#"
        create keep
        create q
        send q body=a
        recv q
        delete q
        restart
        create q
        send q body=b
        ack q r1
        recv q
        ack q r1
        peek q
        "#,
        expect![[r#"
            create keep
              created id=1
            create q
              created id=2
            send q body=a
              m1 visible_at=0
            recv q
              m1 r1 body=a until=30000 count=1 prio=0 first=0
            delete q
              deleted
            restart
              restored 1 queues, 0 messages
            create q
              created id=3
            send q body=b
              m2 visible_at=0
            ack q r1
              error ForeignReceipt
            recv q
              m2 r2 body=b until=30000 count=1 prio=0 first=0
            ack q r1
              error ForeignReceipt
            peek q
              m2 InFlight body=b sent=0 count=1 prio=0 first=0
        "#]],
    );
}

#[test]
fn acked_message_receipt_stays_stale_across_restart() {
    check(
        r#"
        create q
        send q body=a
        recv q
        ack q r1
        restart
        send q body=b
        recv q
        # r1 acked message a; it must not delete b, which r2 now holds.
        ack q r1
        peek q
        "#,
        expect![[r#"
            create q
              created id=1
            send q body=a
              m1 visible_at=0
            recv q
              m1 r1 body=a until=30000 count=1 prio=0 first=0
            ack q r1
              ok
            restart
              restored 1 queues, 0 messages
            send q body=b
              m2 visible_at=0
            recv q
              m2 r2 body=b until=30000 count=1 prio=0 first=0
            ack q r1
              error StaleReceipt
            peek q
              m2 InFlight body=b sent=0 count=1 prio=0 first=0
        "#]],
    );
}

// ----- restart -----------------------------------------------------------------------------

#[test]
fn restart_preserves_in_flight_delays_and_counts() {
    check(
        r#"
        create d
        create q vis=1000 dlq=d:3
        send q body=a
        send q body=b delay=5000
        send q body=c prio=2
        recv q max=1 vis=10000
        recv q max=1
        advance 1000
        recv q
        nack q r3 delay=3000 err=later
        advance 500
        stats q
        peek q
        restart
        stats q
        peek q
        # Nothing is visible: r1 holds c until 10000, a waits until 4000, b until 5000.
        recv q max=10
        # r1 survived the restart: it can still move c's timeout, to 7500, and that survives too.
        vis q r1 6000
        restart
        advance 2499
        recv q max=10
        advance 1
        recv q max=10
        advance 999
        recv q max=10
        # At 5000 b's delay ends, and a's third delivery times out: a goes to the DLQ.
        advance 1
        recv q max=10
        advance 2499
        recv q max=10
        advance 1
        recv q max=10
        ack q r1
        stats q
        peek d
        "#,
        expect![[r#"
            create d
              created id=1
            create q vis=1000 dlq=d:3
              created id=2
            send q body=a
              m1 visible_at=0
            send q body=b delay=5000
              m2 visible_at=5000
            send q body=c prio=2
              m3 visible_at=0
            recv q max=1 vis=10000
              m3 r1 body=c until=10000 count=1 prio=2 first=0
            recv q max=1
              m1 r2 body=a until=1000 count=1 prio=0 first=0
            advance 1000
              now=1000
            recv q
              m1 r3 body=a until=2000 count=2 prio=0 first=0
            nack q r3 delay=3000 err=later
              ok
            advance 500
              now=1500
            stats q
              visible=0 in_flight=1 delayed=2 oldest_age_ms=1500 dlq_depth=0
            peek q
              m1 Delayed body=a sent=0 count=2 prio=0 first=0 err=later
              m2 Delayed body=b sent=0 count=0 prio=0
              m3 InFlight body=c sent=0 count=1 prio=2 first=0
            restart
              restored 2 queues, 3 messages
            stats q
              visible=0 in_flight=1 delayed=2 oldest_age_ms=1500 dlq_depth=0
            peek q
              m1 Delayed body=a sent=0 count=2 prio=0 first=0 err=later
              m2 Delayed body=b sent=0 count=0 prio=0
              m3 InFlight body=c sent=0 count=1 prio=2 first=0
            recv q max=10
              (nothing)
            vis q r1 6000
              ok
            restart
              restored 2 queues, 3 messages
            advance 2499
              now=3999
            recv q max=10
              (nothing)
            advance 1
              now=4000
            recv q max=10
              m1 r4 body=a until=5000 count=3 prio=0 first=0 err=later
            advance 999
              now=4999
            recv q max=10
              (nothing)
            advance 1
              now=5000
            recv q max=10
              m2 r5 body=b until=6000 count=1 prio=0 first=5000
            advance 2499
              now=7499
            recv q max=10
              m2 r6 body=b until=8499 count=2 prio=0 first=5000
            advance 1
              now=7500
            recv q max=10
              m3 r7 body=c until=8500 count=2 prio=2 first=0
            ack q r1
              error StaleReceipt
            stats q
              visible=0 in_flight=2 delayed=0 oldest_age_ms=7500 dlq_depth=1
            peek d
              m1 Visible body=a sent=0 count=3 prio=0 first=0 from=q err=later
        "#]],
    );
}

#[test]
fn restart_keeps_dead_letter_state() {
    check(
        r#"
        create d
        create q vis=1000 dlq=d:1
        send q body=a
        recv q
        nack q r1 err=boom
        restart
        peek d
        move d
        restart
        peek q
        recv q
        "#,
        expect![[r#"
            create d
              created id=1
            create q vis=1000 dlq=d:1
              created id=2
            send q body=a
              m1 visible_at=0
            recv q
              m1 r1 body=a until=1000 count=1 prio=0 first=0
            nack q r1 err=boom
              ok
            restart
              restored 2 queues, 1 messages
            peek d
              m1 Visible body=a sent=0 count=1 prio=0 first=0 from=q err=boom
            move d
              moved=1 failed=0 remaining_visible=0
            restart
              restored 2 queues, 1 messages
            peek q
              m1 Visible body=a sent=0 count=0 prio=0 first=0 err=boom
            recv q
              m1 r2 body=a until=1000 count=1 prio=0 first=0 err=boom
        "#]],
    );
}

#[test]
fn expiry_during_downtime_dead_letters_as_without_it() {
    // The same history with and without a crash must leave the message in the same place.
    check(
        r#"
        create d
        create q vis=1000 dlq=d:1
        send q body=a
        recv q
        advance 5000
        stats q
        stats d
        "#,
        expect![[r#"
            create d
              created id=1
            create q vis=1000 dlq=d:1
              created id=2
            send q body=a
              m1 visible_at=0
            recv q
              m1 r1 body=a until=1000 count=1 prio=0 first=0
            advance 5000
              now=5000
            stats q
              visible=0 in_flight=0 delayed=0 oldest_age_ms=- dlq_depth=1
            stats d
              visible=1 in_flight=0 delayed=0 oldest_age_ms=5000 dlq_depth=-
        "#]],
    );
    check(
        r#"
        create d
        create q vis=1000 dlq=d:1
        send q body=a
        recv q
        crash 5000
        stats q
        stats d
        "#,
        expect![[r#"
            create d
              created id=1
            create q vis=1000 dlq=d:1
              created id=2
            send q body=a
              m1 visible_at=0
            recv q
              m1 r1 body=a until=1000 count=1 prio=0 first=0
            crash 5000
              down until now=5000
              restored 2 queues, 1 messages
            stats q
              visible=0 in_flight=0 delayed=0 oldest_age_ms=- dlq_depth=1
            stats d
              visible=1 in_flight=0 delayed=0 oldest_age_ms=5000 dlq_depth=-
        "#]],
    );
}

#[test]
fn restart_after_zero_visibility_receive_at_limit() {
    // The timer of a zero-visibility delivery is due at once; with or without a restart
    // before it runs, the message has used its receive and belongs in the DLQ.
    check(
        r#"
        create d
        create q dlq=d:1
        send q body=a
        recv q vis=0
        advance 0
        stats q
        stats d
        "#,
        expect![[r#"
            create d
              created id=1
            create q dlq=d:1
              created id=2
            send q body=a
              m1 visible_at=0
            recv q vis=0
              m1 r1 body=a until=0 count=1 prio=0 first=0
            advance 0
              now=0
            stats q
              visible=0 in_flight=0 delayed=0 oldest_age_ms=- dlq_depth=1
            stats d
              visible=1 in_flight=0 delayed=0 oldest_age_ms=0 dlq_depth=-
        "#]],
    );
    check(
        r#"
        create d
        create q dlq=d:1
        send q body=a
        recv q vis=0
        restart
        stats q
        stats d
        "#,
        expect![[r#"
            create d
              created id=1
            create q dlq=d:1
              created id=2
            send q body=a
              m1 visible_at=0
            recv q vis=0
              m1 r1 body=a until=0 count=1 prio=0 first=0
            restart
              restored 2 queues, 1 messages
            stats q
              visible=0 in_flight=0 delayed=0 oldest_age_ms=- dlq_depth=1
            stats d
              visible=1 in_flight=0 delayed=0 oldest_age_ms=0 dlq_depth=-
        "#]],
    );
}

#[test]
fn restart_keeps_a_hold_that_ended_before_the_dead_letter_queue_existed() {
    // The hold ended while the DLQ was missing, so the message stayed; a restart after the
    // DLQ appears must not decide that expiry again under the new policy.
    check(
        r#"
        create d
        create q vis=1000 dlq=d:1
        delete d
        send q body=a
        recv q
        advance 1000
        create d
        stats q
        restart
        stats q
        stats d
        "#,
        expect![[r#"
            create d
              created id=1
            create q vis=1000 dlq=d:1
              created id=2
            delete d
              deleted
            send q body=a
              m1 visible_at=0
            recv q
              m1 r1 body=a until=1000 count=1 prio=0 first=0
            advance 1000
              now=1000
            create d
              created id=3
            stats q
              visible=1 in_flight=0 delayed=0 oldest_age_ms=1000 dlq_depth=0
            restart
              restored 2 queues, 1 messages
            stats q
              visible=1 in_flight=0 delayed=0 oldest_age_ms=1000 dlq_depth=0
            stats d
              visible=0 in_flight=0 delayed=0 oldest_age_ms=- dlq_depth=-
        "#]],
    );
}

#[test]
fn restart_applies_retention_missed_while_down() {
    check(
        r#"
        create q retention=60000
        send q body=a
        send q body=b delay=1000
        advance 30000
        send q body=c
        crash 40000
        stats q
        peek q
        "#,
        expect![[r#"
            create q retention=60000
              created id=1
            send q body=a
              m1 visible_at=0
            send q body=b delay=1000
              m2 visible_at=1000
            advance 30000
              now=30000
            send q body=c
              m3 visible_at=30000
            crash 40000
              down until now=70000
              restored 1 queues, 1 messages
            stats q
              visible=1 in_flight=0 delayed=0 oldest_age_ms=40000 dlq_depth=-
            peek q
              m3 Visible body=c sent=30000 count=0 prio=0
        "#]],
    );
}

// ----- queues ------------------------------------------------------------------------------

#[test]
fn create_is_idempotent_for_same_attributes() {
    check(
        r#"
        create d
        create q vis=1000 dlq=d:3
        create q vis=1000 dlq=d:3 tag=team:x
        create q vis=2000 dlq=d:3
        create q vis=1000 dlq=d:4
        create q vis=1000
        create q2 dlq=missing:3
        create q3 dlq=q3:3
        create q4 dlq=d:0
        create bad.name
        create q5 retention=1000
        "#,
        expect![[r#"
            create d
              created id=1
            create q vis=1000 dlq=d:3
              created id=2
            create q vis=1000 dlq=d:3 tag=team:x
              exists id=2
            create q vis=2000 dlq=d:3
              error QueueExists("q")
            create q vis=1000 dlq=d:4
              error QueueExists("q")
            create q vis=1000
              error QueueExists("q")
            create q2 dlq=missing:3
              error DeadLetterQueueNotFound("missing")
            create q3 dlq=q3:3
              error Invalid(dead_letter.queue)
            create q4 dlq=d:0
              error Invalid(dead_letter.max_receive_count)
            create bad.name
              error Invalid(name)
            create q5 retention=1000
              error Invalid(retention_ms)
        "#]],
    );
}

#[test]
fn update_needs_an_existing_dead_letter_queue() {
    check(
        r#"
        create q
        set q dlq=d:2
        create d
        set q dlq=d:2
        stats q
        set q dlq=none
        stats q
        set nowhere vis=1
        "#,
        expect![[r#"
            create q
              created id=1
            set q dlq=d:2
              error DeadLetterQueueNotFound("d")
            create d
              created id=2
            set q dlq=d:2
              updated id=1
            stats q
              visible=0 in_flight=0 delayed=0 oldest_age_ms=- dlq_depth=0
            set q dlq=none
              updated id=1
            stats q
              visible=0 in_flight=0 delayed=0 oldest_age_ms=- dlq_depth=-
            set nowhere vis=1
              error QueueNotFound("nowhere")
        "#]],
    );
}

// ----- limits ------------------------------------------------------------------------------

#[test]
fn message_too_large() {
    check(
        r#"
        create q max_bytes=10
        send q size=10
        send q size=11
        send q prio=10
        send q delay=1 at=5
        stats q
        "#,
        expect![[r#"
            create q max_bytes=10
              created id=1
            send q size=10
              m1 visible_at=0
            send q size=11
              error MessageTooLarge(11 > 10)
            send q prio=10
              error Invalid(priority)
            send q delay=1 at=5
              error Invalid(delay_ms)
            stats q
              visible=1 in_flight=0 delayed=0 oldest_age_ms=0 dlq_depth=-
        "#]],
    );
}

#[test]
fn receive_stops_at_the_byte_budget() {
    // 16 MiB a receive: sixteen 1 MiB messages fit exactly, the seventeenth waits.
    check(
        r#"
        create q
        send q size=1048576 count=17
        send q size=1048577
        recv q max=20 brief
        recv q max=20 brief
        stats q
        "#,
        expect![[r#"
            create q
              created id=1
            send q size=1048576 count=17
              m1..m17
            send q size=1048577
              error MessageTooLarge(1048577 > 1048576)
            recv q max=20 brief
              16 messages, 16777216 bytes: m1 m2 m3 m4 m5 m6 m7 m8 m9 m10 m11 m12 m13 m14 m15 m16
            recv q max=20 brief
              1 messages, 1048576 bytes: m17
            stats q
              visible=0 in_flight=17 delayed=0 oldest_age_ms=0 dlq_depth=-
        "#]],
    );
}

// ----- FIFO queues -------------------------------------------------------------------------

#[test]
fn fifo_create_rules() {
    check(
        r#"
        # A .fifo name belongs to a FIFO queue, and only FIFO queues take dedup settings.
        create jobs.fifo
        create jobs.fifo fifo
        create plain dedup=content
        create plain scope=group
        create plain window=1000
        create f fifo window=0
        create f fifo window=86400001
        create f fifo window=86400000 dedup=content scope=group
        # The same name with other FIFO settings is another queue.
        create f fifo window=86400000 dedup=content
        create f fifo window=86400000 dedup=content scope=group tag=team:x
        set f window=0
        set f dedup=off window=1000
        set plain dedup=content
        create plain
        set plain window=1000
        "#,
        expect![[r#"
            create jobs.fifo
              error Invalid(fifo)
            create jobs.fifo fifo
              created id=1
            create plain dedup=content
              error Invalid(content_based_dedup)
            create plain scope=group
              error Invalid(dedup_scope)
            create plain window=1000
              error Invalid(dedup_window_ms)
            create f fifo window=0
              error Invalid(dedup_window_ms)
            create f fifo window=86400001
              error Invalid(dedup_window_ms)
            create f fifo window=86400000 dedup=content scope=group
              created id=2
            create f fifo window=86400000 dedup=content
              error QueueExists("f")
            create f fifo window=86400000 dedup=content scope=group tag=team:x
              exists id=2
            set f window=0
              error Invalid(dedup_window_ms)
            set f dedup=off window=1000
              updated id=2
            set plain dedup=content
              error QueueNotFound("plain")
            create plain
              created id=3
            set plain window=1000
              error Invalid(dedup_window_ms)
        "#]],
    );
}

#[test]
fn fifo_send_rules() {
    check(
        r#"
        create q fifo
        create c fifo dedup=content
        create s
        send q body=a dedup=d1
        send q body=a group=g prio=1 dedup=d1
        send q body=a group=g delay=0 dedup=d1
        send q body=a group=g delay=10 dedup=d1
        send q body=a group=g at=10 dedup=d1
        send q body=a group=g
        send q body=a group= dedup=d1
        send q body=a group=g dedup=
        send c body=a group=g
        send s body=a dedup=d1
        send s body=a group=g
        # None of the refusals left a dedup record behind.
        send q body=a group=g dedup=d1
        dedup q
        dedup c
        stats q
        "#,
        expect![[r#"
            create q fifo
              created id=1
            create c fifo dedup=content
              created id=2
            create s
              created id=3
            send q body=a dedup=d1
              error Invalid(group_id)
            send q body=a group=g prio=1 dedup=d1
              error Invalid(priority)
            send q body=a group=g delay=0 dedup=d1
              error Invalid(delay_ms)
            send q body=a group=g delay=10 dedup=d1
              error Invalid(delay_ms)
            send q body=a group=g at=10 dedup=d1
              error Invalid(delay_ms)
            send q body=a group=g
              error Invalid(dedup_id)
            send q body=a group= dedup=d1
              error Invalid(group_id)
            send q body=a group=g dedup=
              error Invalid(dedup_id)
            send c body=a group=g
              m1 seq=1 visible_at=0
            send s body=a dedup=d1
              error Invalid(dedup_id)
            send s body=a group=g
              m2 visible_at=0
            send q body=a group=g dedup=d1
              m3 seq=3 visible_at=0
            dedup q
              d1 -> m3 seq=3 expires=300000
            dedup c
              sha:ca978112 -> m1 seq=1 expires=300000
            stats q
              visible=1 in_flight=0 delayed=0 oldest_age_ms=0 dlq_depth=-
        "#]],
    );
}

#[test]
fn fifo_orders_each_group_and_blocks_it_while_in_flight() {
    check(
        r#"
        create q fifo vis=1000
        send q body=a1 group=a dedup=1
        send q body=b1 group=b dedup=2
        send q body=a2 group=a dedup=3
        send q body=a3 group=a dedup=4
        send q body=b2 group=b dedup=5
        # One message each: the oldest head first, and group a is held while a1 is out.
        recv q
        recv q
        recv q max=10
        # Acking a1 frees group a, which continues in send order.
        ack q r1
        recv q max=10
        stats q
        ack q r2
        recv q max=10
        ack q r3 r4
        recv q max=10
        stats q
        "#,
        expect![[r#"
            create q fifo vis=1000
              created id=1
            send q body=a1 group=a dedup=1
              m1 seq=1 visible_at=0
            send q body=b1 group=b dedup=2
              m2 seq=2 visible_at=0
            send q body=a2 group=a dedup=3
              m3 seq=3 visible_at=0
            send q body=a3 group=a dedup=4
              m4 seq=4 visible_at=0
            send q body=b2 group=b dedup=5
              m5 seq=5 visible_at=0
            recv q
              m1 r1 body=a1 until=1000 count=1 prio=0 first=0 group=a
            recv q
              m2 r2 body=b1 until=1000 count=1 prio=0 first=0 group=b
            recv q max=10
              (nothing)
            ack q r1
              ok
            recv q max=10
              m3 r3 body=a2 until=1000 count=1 prio=0 first=0 group=a
              m4 r4 body=a3 until=1000 count=1 prio=0 first=0 group=a
            stats q
              visible=1 in_flight=3 delayed=0 oldest_age_ms=0 dlq_depth=-
            ack q r2
              ok
            recv q max=10
              m5 r5 body=b2 until=1000 count=1 prio=0 first=0 group=b
            ack q r3 r4
              r3: ok
              r4: ok
            recv q max=10
              (nothing)
            stats q
              visible=0 in_flight=1 delayed=0 oldest_age_ms=0 dlq_depth=-
        "#]],
    );
}

#[test]
fn fifo_receive_drains_one_group_then_the_next_oldest() {
    check(
        r#"
        create q fifo
        send q body=a1 group=a dedup=1
        send q body=b1 group=b dedup=2
        send q body=c1 group=c dedup=3
        send q body=b2 group=b dedup=4
        send q body=a2 group=a dedup=5
        send q body=b3 group=b dedup=6
        send q body=c2 group=c dedup=7
        recv q max=5
        recv q max=5
        recv q max=5
        "#,
        expect![[r#"
            create q fifo
              created id=1
            send q body=a1 group=a dedup=1
              m1 seq=1 visible_at=0
            send q body=b1 group=b dedup=2
              m2 seq=2 visible_at=0
            send q body=c1 group=c dedup=3
              m3 seq=3 visible_at=0
            send q body=b2 group=b dedup=4
              m4 seq=4 visible_at=0
            send q body=a2 group=a dedup=5
              m5 seq=5 visible_at=0
            send q body=b3 group=b dedup=6
              m6 seq=6 visible_at=0
            send q body=c2 group=c dedup=7
              m7 seq=7 visible_at=0
            recv q max=5
              m1 r1 body=a1 until=30000 count=1 prio=0 first=0 group=a
              m5 r2 body=a2 until=30000 count=1 prio=0 first=0 group=a
              m2 r3 body=b1 until=30000 count=1 prio=0 first=0 group=b
              m4 r4 body=b2 until=30000 count=1 prio=0 first=0 group=b
              m6 r5 body=b3 until=30000 count=1 prio=0 first=0 group=b
            recv q max=5
              m3 r6 body=c1 until=30000 count=1 prio=0 first=0 group=c
              m7 r7 body=c2 until=30000 count=1 prio=0 first=0 group=c
            recv q max=5
              (nothing)
        "#]],
    );
}

#[test]
fn fifo_visibility_expiry_gives_the_group_back_from_its_head() {
    check(
        r#"
        create q fifo vis=1000
        send q body=a1 group=a dedup=1
        send q body=a2 group=a dedup=2
        send q body=a3 group=a dedup=3
        recv q max=2
        advance 999
        recv q max=10
        advance 1
        # a1 and a2 came back; the next receive starts again at a1.
        recv q max=1
        recv q max=10
        ack q r3
        recv q max=10
        "#,
        expect![[r#"
            create q fifo vis=1000
              created id=1
            send q body=a1 group=a dedup=1
              m1 seq=1 visible_at=0
            send q body=a2 group=a dedup=2
              m2 seq=2 visible_at=0
            send q body=a3 group=a dedup=3
              m3 seq=3 visible_at=0
            recv q max=2
              m1 r1 body=a1 until=1000 count=1 prio=0 first=0 group=a
              m2 r2 body=a2 until=1000 count=1 prio=0 first=0 group=a
            advance 999
              now=999
            recv q max=10
              (nothing)
            advance 1
              now=1000
            recv q max=1
              m1 r3 body=a1 until=2000 count=2 prio=0 first=0 group=a
            recv q max=10
              (nothing)
            ack q r3
              ok
            recv q max=10
              m2 r4 body=a2 until=2000 count=2 prio=0 first=0 group=a
              m3 r5 body=a3 until=2000 count=1 prio=0 first=1000 group=a
        "#]],
    );
}

#[test]
fn fifo_releasing_a_later_message_keeps_its_group_blocked() {
    check(
        r#"
        create q fifo
        send q body=a1 group=a dedup=1
        send q body=a2 group=a dedup=2
        send q body=b1 group=b dedup=3
        recv q max=2
        # a2 is visible again, but a1 is still out: a stays blocked, b is not.
        vis q r2 0
        peek q
        recv q max=10
        ack q r1
        recv q max=10
        "#,
        expect![[r#"
            create q fifo
              created id=1
            send q body=a1 group=a dedup=1
              m1 seq=1 visible_at=0
            send q body=a2 group=a dedup=2
              m2 seq=2 visible_at=0
            send q body=b1 group=b dedup=3
              m3 seq=3 visible_at=0
            recv q max=2
              m1 r1 body=a1 until=30000 count=1 prio=0 first=0 group=a
              m2 r2 body=a2 until=30000 count=1 prio=0 first=0 group=a
            vis q r2 0
              ok
            peek q
              m1 InFlight body=a1 sent=0 count=1 prio=0 first=0 group=a
              m2 Visible body=a2 sent=0 count=1 prio=0 first=0 group=a
              m3 Visible body=b1 sent=0 count=0 prio=0 group=b
            recv q max=10
              m3 r3 body=b1 until=30000 count=1 prio=0 first=0 group=b
            ack q r1
              ok
            recv q max=10
              m2 r4 body=a2 until=30000 count=2 prio=0 first=0 group=a
        "#]],
    );
}

#[test]
fn fifo_group_waits_for_its_head_to_be_visible() {
    check(
        r#"
        create q fifo
        send q body=a1 group=a dedup=1
        send q body=a2 group=a dedup=2
        send q body=b1 group=b dedup=3
        recv q max=1
        # a1 comes back only in 1000 ms; a2 must not overtake it meanwhile.
        nack q r1 delay=1000 err=retry
        recv q max=10
        ack q r2
        advance 999
        recv q max=10
        advance 1
        recv q max=10
        "#,
        expect![[r#"
            create q fifo
              created id=1
            send q body=a1 group=a dedup=1
              m1 seq=1 visible_at=0
            send q body=a2 group=a dedup=2
              m2 seq=2 visible_at=0
            send q body=b1 group=b dedup=3
              m3 seq=3 visible_at=0
            recv q max=1
              m1 r1 body=a1 until=30000 count=1 prio=0 first=0 group=a
            nack q r1 delay=1000 err=retry
              ok
            recv q max=10
              m3 r2 body=b1 until=30000 count=1 prio=0 first=0 group=b
            ack q r2
              ok
            advance 999
              now=999
            recv q max=10
              (nothing)
            advance 1
              now=1000
            recv q max=10
              m1 r3 body=a1 until=31000 count=2 prio=0 first=0 err=retry group=a
              m2 r4 body=a2 until=31000 count=1 prio=0 first=1000 group=a
        "#]],
    );
}

#[test]
fn fifo_queue_delay_applies_and_a_delayed_head_holds_its_group() {
    check(
        r#"
        create q fifo delay=1000
        send q body=a1 group=a dedup=1
        set q delay=0
        send q body=a2 group=a dedup=2
        send q body=b1 group=b dedup=3
        stats q
        recv q max=10
        advance 1000
        recv q max=10
        "#,
        expect![[r#"
            create q fifo delay=1000
              created id=1
            send q body=a1 group=a dedup=1
              m1 seq=1 visible_at=1000
            set q delay=0
              updated id=1
            send q body=a2 group=a dedup=2
              m2 seq=2 visible_at=0
            send q body=b1 group=b dedup=3
              m3 seq=3 visible_at=0
            stats q
              visible=2 in_flight=0 delayed=1 oldest_age_ms=0 dlq_depth=-
            recv q max=10
              m3 r1 body=b1 until=30000 count=1 prio=0 first=0 group=b
            advance 1000
              now=1000
            recv q max=10
              m1 r2 body=a1 until=31000 count=1 prio=0 first=1000 group=a
              m2 r3 body=a2 until=31000 count=1 prio=0 first=1000 group=a
        "#]],
    );
}

#[test]
fn fifo_sequence_numbers_rise_in_send_order_across_restart() {
    check(
        r#"
        create q fifo
        send q body=a group=g dedup=1
        send q body=b group=h dedup=2
        send q body=c group=g dedup=3
        send q body=b group=h dedup=2
        restart
        send q body=d group=g dedup=4
        send q body=a group=g dedup=1
        recv q max=10
        "#,
        expect![[r#"
            create q fifo
              created id=1
            send q body=a group=g dedup=1
              m1 seq=1 visible_at=0
            send q body=b group=h dedup=2
              m2 seq=2 visible_at=0
            send q body=c group=g dedup=3
              m3 seq=3 visible_at=0
            send q body=b group=h dedup=2
              dup of m2 seq=2
            restart
              restored 1 queues, 3 messages
            send q body=d group=g dedup=4
              m4 seq=65537 visible_at=0
            send q body=a group=g dedup=1
              dup of m1 seq=1
            recv q max=10
              m1 r1 body=a until=30000 count=1 prio=0 first=0 group=g
              m3 r2 body=c until=30000 count=1 prio=0 first=0 group=g
              m4 r3 body=d until=30000 count=1 prio=0 first=0 group=g
              m2 r4 body=b until=30000 count=1 prio=0 first=0 group=h
        "#]],
    );
}

// ----- FIFO deduplication ------------------------------------------------------------------

#[test]
fn fifo_dedup_by_id_survives_ack_and_restart_and_ends_with_its_window() {
    check(
        r#"
        create q fifo window=10000
        send q body=first group=g dedup=d1
        # Another body under the same id is still the same message.
        send q body=second group=g dedup=d1
        stats q
        recv q max=10
        ack q r1
        advance 5000
        send q body=third group=g dedup=d1
        dedup q
        restart
        send q body=fourth group=g dedup=d1
        advance 4999
        send q body=fifth group=g dedup=d1
        # The window counts from the first send, and the duplicates did not extend it.
        advance 1
        dedup q
        send q body=sixth group=g dedup=d1
        dedup q
        recv q max=10
        "#,
        expect![[r#"
            create q fifo window=10000
              created id=1
            send q body=first group=g dedup=d1
              m1 seq=1 visible_at=0
            send q body=second group=g dedup=d1
              dup of m1 seq=1
            stats q
              visible=1 in_flight=0 delayed=0 oldest_age_ms=0 dlq_depth=-
            recv q max=10
              m1 r1 body=first until=30000 count=1 prio=0 first=0 group=g
            ack q r1
              ok
            advance 5000
              now=5000
            send q body=third group=g dedup=d1
              dup of m1 seq=1
            dedup q
              d1 -> m1 seq=1 expires=10000
            restart
              restored 1 queues, 0 messages
            send q body=fourth group=g dedup=d1
              dup of m1 seq=1
            advance 4999
              now=9999
            send q body=fifth group=g dedup=d1
              dup of m1 seq=1
            advance 1
              now=10000
            dedup q
              (none)
            send q body=sixth group=g dedup=d1
              m2 seq=65537 visible_at=10000
            dedup q
              d1 -> m2 seq=65537 expires=20000
            recv q max=10
              m2 r2 body=sixth until=40000 count=1 prio=0 first=10000 group=g
        "#]],
    );
}

#[test]
fn fifo_dedup_window_ends_at_its_time_even_before_the_timer_runs() {
    check(
        r#"
        create q fifo window=1000
        send q body=a group=g dedup=d1
        clock 999
        send q body=b group=g dedup=d1
        clock 1
        # The record is still there, but its window has ended.
        dedup q
        send q body=c group=g dedup=d1
        dedup q
        advance 0
        dedup q
        "#,
        expect![[r#"
            create q fifo window=1000
              created id=1
            send q body=a group=g dedup=d1
              m1 seq=1 visible_at=0
            clock 999
              now=999 (timers not run)
            send q body=b group=g dedup=d1
              dup of m1 seq=1
            clock 1
              now=1000 (timers not run)
            dedup q
              d1 -> m1 seq=1 expires=1000
            send q body=c group=g dedup=d1
              m2 seq=2 visible_at=1000
            dedup q
              d1 -> m2 seq=2 expires=2000
            advance 0
              now=1000
            dedup q
              d1 -> m2 seq=2 expires=2000
        "#]],
    );
}

#[test]
fn fifo_dedup_window_ends_while_down() {
    check(
        r#"
        create q fifo window=1000
        send q body=a group=g dedup=d1
        crash 999
        send q body=b group=g dedup=d1
        dedup q
        crash 1
        dedup q
        send q body=c group=g dedup=d1
        peek q
        "#,
        expect![[r#"
            create q fifo window=1000
              created id=1
            send q body=a group=g dedup=d1
              m1 seq=1 visible_at=0
            crash 999
              down until now=999
              restored 1 queues, 1 messages
            send q body=b group=g dedup=d1
              dup of m1 seq=1
            dedup q
              d1 -> m1 seq=1 expires=1000
            crash 1
              down until now=1000
              restored 1 queues, 1 messages
            dedup q
              (none)
            send q body=c group=g dedup=d1
              m2 seq=65537 visible_at=1000
            peek q
              m1 Visible body=a sent=0 count=0 prio=0 group=g
              m2 Visible body=c sent=1000 count=0 prio=0 group=g
        "#]],
    );
}

#[test]
fn fifo_dedup_window_change_applies_to_later_sends() {
    check(
        r#"
        create q fifo window=1000
        send q body=a group=g dedup=d1
        set q window=5000
        send q body=b group=g dedup=d2
        dedup q
        advance 1000
        send q body=c group=g dedup=d1
        send q body=d group=g dedup=d2
        dedup q
        "#,
        expect![[r#"
            create q fifo window=1000
              created id=1
            send q body=a group=g dedup=d1
              m1 seq=1 visible_at=0
            set q window=5000
              updated id=1
            send q body=b group=g dedup=d2
              m2 seq=2 visible_at=0
            dedup q
              d1 -> m1 seq=1 expires=1000
              d2 -> m2 seq=2 expires=5000
            advance 1000
              now=1000
            send q body=c group=g dedup=d1
              m3 seq=3 visible_at=1000
            send q body=d group=g dedup=d2
              dup of m2 seq=2
            dedup q
              d1 -> m3 seq=3 expires=6000
              d2 -> m2 seq=2 expires=5000
        "#]],
    );
}

#[test]
fn fifo_content_based_dedup() {
    check(
        r#"
        create q fifo dedup=content
        send q body=hello group=g
        send q body=hello group=g
        # Another group, same body: the scope is the queue.
        send q body=hello group=h
        # An explicit id takes precedence over the body.
        send q body=hello group=g dedup=x
        send q body=other group=g dedup=x
        send q body=other group=g
        dedup q
        set q dedup=off
        send q body=new group=g
        send q body=hello group=g dedup=y
        peek q
        "#,
        expect![[r#"
            create q fifo dedup=content
              created id=1
            send q body=hello group=g
              m1 seq=1 visible_at=0
            send q body=hello group=g
              dup of m1 seq=1
            send q body=hello group=h
              dup of m1 seq=1
            send q body=hello group=g dedup=x
              m2 seq=2 visible_at=0
            send q body=other group=g dedup=x
              dup of m2 seq=2
            send q body=other group=g
              m3 seq=3 visible_at=0
            dedup q
              sha:2cf24dba -> m1 seq=1 expires=300000
              sha:d9298a10 -> m3 seq=3 expires=300000
              x -> m2 seq=2 expires=300000
            set q dedup=off
              updated id=1
            send q body=new group=g
              error Invalid(dedup_id)
            send q body=hello group=g dedup=y
              m4 seq=4 visible_at=0
            peek q
              m1 Visible body=hello sent=0 count=0 prio=0 group=g
              m2 Visible body=hello sent=0 count=0 prio=0 group=g
              m3 Visible body=other sent=0 count=0 prio=0 group=g
              m4 Visible body=hello sent=0 count=0 prio=0 group=g
        "#]],
    );
}

#[test]
fn fifo_dedup_scope_message_group() {
    check(
        r#"
        create q fifo scope=group
        create c fifo scope=group dedup=content
        send q body=a group=g dedup=d1
        send q body=b group=h dedup=d1
        send q body=c group=g dedup=d1
        send q body=d group=h dedup=d1
        send c body=same group=g
        send c body=same group=h
        send c body=same group=g
        dedup q
        dedup c
        restart
        send q body=e group=h dedup=d1
        send c body=same group=h
        "#,
        expect![[r#"
            create q fifo scope=group
              created id=1
            create c fifo scope=group dedup=content
              created id=2
            send q body=a group=g dedup=d1
              m1 seq=1 visible_at=0
            send q body=b group=h dedup=d1
              m2 seq=2 visible_at=0
            send q body=c group=g dedup=d1
              dup of m1 seq=1
            send q body=d group=h dedup=d1
              dup of m2 seq=2
            send c body=same group=g
              m3 seq=3 visible_at=0
            send c body=same group=h
              m4 seq=4 visible_at=0
            send c body=same group=g
              dup of m3 seq=3
            dedup q
              1:gd1 -> m1 seq=1 expires=300000
              1:hd1 -> m2 seq=2 expires=300000
            dedup c
              1:gsha:0967115f -> m3 seq=3 expires=300000
              1:hsha:0967115f -> m4 seq=4 expires=300000
            restart
              restored 2 queues, 4 messages
            send q body=e group=h dedup=d1
              dup of m2 seq=2
            send c body=same group=h
              dup of m4 seq=4
        "#]],
    );
}

#[test]
fn fifo_dedup_scope_queue_spans_groups() {
    check(
        r#"
        create q fifo
        send q body=a group=g dedup=d1
        send q body=b group=h dedup=d1
        recv q max=10
        "#,
        expect![[r#"
            create q fifo
              created id=1
            send q body=a group=g dedup=d1
              m1 seq=1 visible_at=0
            send q body=b group=h dedup=d1
              dup of m1 seq=1
            recv q max=10
              m1 r1 body=a until=30000 count=1 prio=0 first=0 group=g
        "#]],
    );
}

#[test]
fn fifo_dedup_scope_group_keys_of_different_groups_never_collide() {
    // A group-scoped dedup key is built from the group and the id. However they are joined,
    // two different (group, id) pairs must never share a key, or a send would be swallowed as
    // a duplicate of another group's message. NUL bytes are the case a separator misses (the
    // SQS edge refuses them; the native API passes them through), plain concatenation the
    // second pair.
    check(
        r#"
        create q fifo scope=group
        send q body=first group=a\0b dedup=c
        send q body=second group=a dedup=b\0c
        send q body=third group=ab dedup=c
        send q body=fourth group=a dedup=bc
        peek q
        "#,
        expect![[r#"
            create q fifo scope=group
              created id=1
            send q body=first group=a\0b dedup=c
              m1 seq=1 visible_at=0
            send q body=second group=a dedup=b\0c
              m2 seq=2 visible_at=0
            send q body=third group=ab dedup=c
              m3 seq=3 visible_at=0
            send q body=fourth group=a dedup=bc
              m4 seq=4 visible_at=0
            peek q
              m1 Visible body=first sent=0 count=0 prio=0 group=a\0b
              m2 Visible body=second sent=0 count=0 prio=0 group=a
              m3 Visible body=third sent=0 count=0 prio=0 group=ab
              m4 Visible body=fourth sent=0 count=0 prio=0 group=a
        "#]],
    );
}

#[test]
fn fifo_purge_clears_dedup_also_across_restart() {
    check(
        r#"
        create q fifo
        send q body=a group=g dedup=d1
        send q body=b group=g dedup=d2
        recv q
        purge q
        dedup q
        send q body=c group=g dedup=d1
        restart
        send q body=d group=g dedup=d2
        send q body=e group=g dedup=d1
        recv q max=10
        "#,
        expect![[r#"
            create q fifo
              created id=1
            send q body=a group=g dedup=d1
              m1 seq=1 visible_at=0
            send q body=b group=g dedup=d2
              m2 seq=2 visible_at=0
            recv q
              m1 r1 body=a until=30000 count=1 prio=0 first=0 group=g
            purge q
              purged 2
            dedup q
              (none)
            send q body=c group=g dedup=d1
              m3 seq=3 visible_at=0
            restart
              restored 1 queues, 1 messages
            send q body=d group=g dedup=d2
              m4 seq=65537 visible_at=0
            send q body=e group=g dedup=d1
              dup of m3 seq=3
            recv q max=10
              m3 r2 body=c until=30000 count=1 prio=0 first=0 group=g
              m4 r3 body=d until=30000 count=1 prio=0 first=0 group=g
        "#]],
    );
}

#[test]
fn fifo_delete_forgets_dedup_and_a_new_queue_starts_clean() {
    check(
        r#"
        create q fifo
        send q body=a group=g dedup=d1
        delete q
        create q fifo
        send q body=b group=g dedup=d1
        restart
        dedup q
        send q body=c group=g dedup=d1
        "#,
        expect![[r#"
            create q fifo
              created id=1
            send q body=a group=g dedup=d1
              m1 seq=1 visible_at=0
            delete q
              deleted
            create q fifo
              created id=2
            send q body=b group=g dedup=d1
              m2 seq=2 visible_at=0
            restart
              restored 1 queues, 1 messages
            dedup q
              d1 -> m2 seq=2 expires=300000
            send q body=c group=g dedup=d1
              dup of m2 seq=2
        "#]],
    );
}

// ----- FIFO dead letters -------------------------------------------------------------------

#[test]
fn fifo_dead_letter_queue_must_match_the_queue_type() {
    check(
        r#"
        create std
        create dlq.fifo fifo
        create q.fifo fifo dlq=std:3
        create s dlq=dlq.fifo:3
        create q.fifo fifo dlq=dlq.fifo:3
        create s dlq=std:3
        set q.fifo dlq=std:1
        set s dlq=dlq.fifo:1
        set q.fifo dlq=none
        set q.fifo dlq=dlq.fifo:1
        "#,
        expect![[r#"
            create std
              created id=1
            create dlq.fifo fifo
              created id=2
            create q.fifo fifo dlq=std:3
              error Invalid(dead_letter.queue)
            create s dlq=dlq.fifo:3
              error Invalid(dead_letter.queue)
            create q.fifo fifo dlq=dlq.fifo:3
              created id=3
            create s dlq=std:3
              created id=4
            set q.fifo dlq=std:1
              error Invalid(dead_letter.queue)
            set s dlq=dlq.fifo:1
              error Invalid(dead_letter.queue)
            set q.fifo dlq=none
              updated id=3
            set q.fifo dlq=dlq.fifo:1
              updated id=3
        "#]],
    );
}

#[test]
fn fifo_failing_head_goes_to_the_dead_letter_queue_and_unblocks_its_group() {
    check(
        r#"
        create dlq.fifo fifo
        create q.fifo fifo vis=1000 dlq=dlq.fifo:2
        send q.fifo body=a1 group=a dedup=1
        send q.fifo body=a2 group=a dedup=2
        send q.fifo body=b1 group=b dedup=3
        recv q.fifo max=1
        advance 1000
        recv q.fifo max=1
        # a1's second hold ends: it goes to the DLQ, and a2 is next in group a.
        advance 1000
        peek dlq.fifo
        recv q.fifo max=10
        recv dlq.fifo
        "#,
        expect![[r#"
            create dlq.fifo fifo
              created id=1
            create q.fifo fifo vis=1000 dlq=dlq.fifo:2
              created id=2
            send q.fifo body=a1 group=a dedup=1
              m1 seq=1 visible_at=0
            send q.fifo body=a2 group=a dedup=2
              m2 seq=2 visible_at=0
            send q.fifo body=b1 group=b dedup=3
              m3 seq=3 visible_at=0
            recv q.fifo max=1
              m1 r1 body=a1 until=1000 count=1 prio=0 first=0 group=a
            advance 1000
              now=1000
            recv q.fifo max=1
              m1 r2 body=a1 until=2000 count=2 prio=0 first=0 group=a
            advance 1000
              now=2000
            peek dlq.fifo
              m1 Visible body=a1 sent=0 count=2 prio=0 first=0 from=q.fifo group=a
            recv q.fifo max=10
              m2 r3 body=a2 until=3000 count=1 prio=0 first=2000 group=a
              m3 r4 body=b1 until=3000 count=1 prio=0 first=2000 group=b
            recv dlq.fifo
              m1 r5 body=a1 until=32000 count=3 prio=0 first=0 from=q.fifo group=a
        "#]],
    );
}

#[test]
fn fifo_dead_letter_at_receive_continues_within_the_group() {
    check(
        r#"
        create dlq.fifo fifo
        create q.fifo fifo dlq=dlq.fifo:5
        send q.fifo body=a1 group=a dedup=1
        send q.fifo body=a2 group=a dedup=2
        send q.fifo body=a3 group=a dedup=3
        send q.fifo body=b1 group=b dedup=4
        recv q.fifo max=1
        nack q.fifo r1 err=bad
        # With the limit lowered, a1 is past it: the next receive moves it and goes on with a2.
        set q.fifo dlq=dlq.fifo:1
        recv q.fifo max=3
        peek dlq.fifo
        "#,
        expect![[r#"
            create dlq.fifo fifo
              created id=1
            create q.fifo fifo dlq=dlq.fifo:5
              created id=2
            send q.fifo body=a1 group=a dedup=1
              m1 seq=1 visible_at=0
            send q.fifo body=a2 group=a dedup=2
              m2 seq=2 visible_at=0
            send q.fifo body=a3 group=a dedup=3
              m3 seq=3 visible_at=0
            send q.fifo body=b1 group=b dedup=4
              m4 seq=4 visible_at=0
            recv q.fifo max=1
              m1 r1 body=a1 until=30000 count=1 prio=0 first=0 group=a
            nack q.fifo r1 err=bad
              ok
            set q.fifo dlq=dlq.fifo:1
              updated id=2
            recv q.fifo max=3
              m2 r2 body=a2 until=30000 count=1 prio=0 first=0 group=a
              m3 r3 body=a3 until=30000 count=1 prio=0 first=0 group=a
              m4 r4 body=b1 until=30000 count=1 prio=0 first=0 group=b
            peek dlq.fifo
              m1 Visible body=a1 sent=0 count=1 prio=0 first=0 from=q.fifo err=bad group=a
        "#]],
    );
}

#[test]
fn fifo_dead_letter_via_nack_and_release() {
    check(
        r#"
        create dlq.fifo fifo
        create q.fifo fifo dlq=dlq.fifo:1
        send q.fifo body=a1 group=a dedup=1
        send q.fifo body=a2 group=a dedup=2
        send q.fifo body=a3 group=a dedup=3
        recv q.fifo max=2
        # Releasing a later message of the batch sends it to the DLQ; a1 still holds the group.
        vis q.fifo r2 0
        recv q.fifo max=10
        nack q.fifo r1 err=bad
        recv q.fifo max=10
        peek dlq.fifo
        "#,
        expect![[r#"
            create dlq.fifo fifo
              created id=1
            create q.fifo fifo dlq=dlq.fifo:1
              created id=2
            send q.fifo body=a1 group=a dedup=1
              m1 seq=1 visible_at=0
            send q.fifo body=a2 group=a dedup=2
              m2 seq=2 visible_at=0
            send q.fifo body=a3 group=a dedup=3
              m3 seq=3 visible_at=0
            recv q.fifo max=2
              m1 r1 body=a1 until=30000 count=1 prio=0 first=0 group=a
              m2 r2 body=a2 until=30000 count=1 prio=0 first=0 group=a
            vis q.fifo r2 0
              ok
            recv q.fifo max=10
              (nothing)
            nack q.fifo r1 err=bad
              ok
            recv q.fifo max=10
              m3 r3 body=a3 until=30000 count=1 prio=0 first=0 group=a
            peek dlq.fifo
              m1 Visible body=a1 sent=0 count=1 prio=0 first=0 from=q.fifo err=bad group=a
              m2 Visible body=a2 sent=0 count=1 prio=0 first=0 from=q.fifo group=a
        "#]],
    );
}

#[test]
fn fifo_redrive_puts_a_message_back_in_send_order() {
    check(
        r#"
        create dlq.fifo fifo
        create q.fifo fifo dlq=dlq.fifo:1
        send q.fifo body=a1 group=a dedup=1
        send q.fifo body=a2 group=a dedup=2
        send q.fifo body=a3 group=a dedup=3
        recv q.fifo max=1
        nack q.fifo r1
        recv q.fifo max=1
        move dlq.fifo
        # a1 keeps its sequence number, so it is a's oldest again, and a2 still holds the group.
        peek q.fifo
        recv q.fifo max=10
        ack q.fifo r2
        recv q.fifo max=10
        "#,
        expect![[r#"
            create dlq.fifo fifo
              created id=1
            create q.fifo fifo dlq=dlq.fifo:1
              created id=2
            send q.fifo body=a1 group=a dedup=1
              m1 seq=1 visible_at=0
            send q.fifo body=a2 group=a dedup=2
              m2 seq=2 visible_at=0
            send q.fifo body=a3 group=a dedup=3
              m3 seq=3 visible_at=0
            recv q.fifo max=1
              m1 r1 body=a1 until=30000 count=1 prio=0 first=0 group=a
            nack q.fifo r1
              ok
            recv q.fifo max=1
              m2 r2 body=a2 until=30000 count=1 prio=0 first=0 group=a
            move dlq.fifo
              moved=1 failed=0 remaining_visible=0
            peek q.fifo
              m1 Visible body=a1 sent=0 count=0 prio=0 first=0 group=a
              m2 InFlight body=a2 sent=0 count=1 prio=0 first=0 group=a
              m3 Visible body=a3 sent=0 count=0 prio=0 group=a
            recv q.fifo max=10
              (nothing)
            ack q.fifo r2
              ok
            recv q.fifo max=10
              m1 r3 body=a1 until=30000 count=1 prio=0 first=0 group=a
              m3 r4 body=a3 until=30000 count=1 prio=0 first=0 group=a
        "#]],
    );
}

// ----- FIFO restart ------------------------------------------------------------------------

#[test]
fn fifo_restart_keeps_groups_blocked_and_in_order() {
    check(
        r#"
        create q fifo vis=5000
        send q body=a1 group=a dedup=1
        send q body=a2 group=a dedup=2
        send q body=b1 group=b dedup=3
        send q body=b2 group=b dedup=4
        recv q max=1
        nack q r1 delay=2000
        recv q max=1
        restart
        # a's head is delayed until 2000 and b1 is in flight until 5000.
        recv q max=10
        crash 2000
        recv q max=10
        crash 3000
        recv q max=10
        "#,
        expect![[r#"
            create q fifo vis=5000
              created id=1
            send q body=a1 group=a dedup=1
              m1 seq=1 visible_at=0
            send q body=a2 group=a dedup=2
              m2 seq=2 visible_at=0
            send q body=b1 group=b dedup=3
              m3 seq=3 visible_at=0
            send q body=b2 group=b dedup=4
              m4 seq=4 visible_at=0
            recv q max=1
              m1 r1 body=a1 until=5000 count=1 prio=0 first=0 group=a
            nack q r1 delay=2000
              ok
            recv q max=1
              m3 r2 body=b1 until=5000 count=1 prio=0 first=0 group=b
            restart
              restored 1 queues, 4 messages
            recv q max=10
              (nothing)
            crash 2000
              down until now=2000
              restored 1 queues, 4 messages
            recv q max=10
              m1 r3 body=a1 until=7000 count=2 prio=0 first=0 group=a
              m2 r4 body=a2 until=7000 count=1 prio=0 first=2000 group=a
            crash 3000
              down until now=5000
              restored 1 queues, 4 messages
            recv q max=10
              m3 r5 body=b1 until=10000 count=2 prio=0 first=0 group=b
              m4 r6 body=b2 until=10000 count=1 prio=0 first=5000 group=b
        "#]],
    );
}

#[test]
fn fifo_expired_receipt_cannot_win_back_a_message_of_a_group_that_moved_on() {
    // a1 and a2 were received together; both holds ended and a1 went to another consumer (r3).
    // The first consumer's r2 must not hide a2 again: it would hold group a beside r3, and
    // could finish a2 before a1. SQS refuses a change with an expired FIFO receipt handle
    // ("receipt handle has expired", reference §3.2), so the lenient form is the strict one.
    check(
        r#"
        create q fifo vis=1000
        send q body=a1 group=a dedup=1
        send q body=a2 group=a dedup=2
        recv q max=2
        advance 1000
        recv q max=1
        vis q r2 5000 lenient
        ack q r3
        recv q max=10
        "#,
        expect![[r#"
            create q fifo vis=1000
              created id=1
            send q body=a1 group=a dedup=1
              m1 seq=1 visible_at=0
            send q body=a2 group=a dedup=2
              m2 seq=2 visible_at=0
            recv q max=2
              m1 r1 body=a1 until=1000 count=1 prio=0 first=0 group=a
              m2 r2 body=a2 until=1000 count=1 prio=0 first=0 group=a
            advance 1000
              now=1000
            recv q max=1
              m1 r3 body=a1 until=2000 count=2 prio=0 first=0 group=a
            vis q r2 5000 lenient
              error NotInFlight
            ack q r3
              ok
            recv q max=10
              m2 r4 body=a2 until=2000 count=2 prio=0 first=0 group=a
        "#]],
    );
}

#[test]
fn fifo_retention_removes_a_head_and_frees_its_group() {
    check(
        r#"
        create q fifo retention=60000
        send q body=a1 group=a dedup=1
        advance 30000
        send q body=a2 group=a dedup=2
        recv q vis=40000
        advance 30000
        peek q
        recv q max=10
        "#,
        expect![[r#"
            create q fifo retention=60000
              created id=1
            send q body=a1 group=a dedup=1
              m1 seq=1 visible_at=0
            advance 30000
              now=30000
            send q body=a2 group=a dedup=2
              m2 seq=2 visible_at=30000
            recv q vis=40000
              m1 r1 body=a1 until=70000 count=1 prio=0 first=30000 group=a
            advance 30000
              now=60000
            peek q
              m2 Visible body=a2 sent=30000 count=0 prio=0 group=a
            recv q max=10
              m2 r2 body=a2 until=90000 count=1 prio=0 first=60000 group=a
        "#]],
    );
}

#[test]
fn fifo_dead_letter_queue_recreated_as_the_other_type_is_no_target() {
    // Creation refuses a dead-letter queue of the other type; the same must hold when the
    // named queue is deleted and created again as the other type: such a queue is treated as
    // missing, so a FIFO message never lands in a standard queue, nor a group-less message in
    // a FIFO queue.
    check(
        r#"
        create dlq fifo
        create q.fifo fifo vis=1000 dlq=dlq:1
        delete dlq
        create dlq
        send q.fifo body=a group=g dedup=1
        recv q.fifo
        advance 1000
        peek dlq
        peek q.fifo
        delete dlq
        create dlq fifo
        recv q.fifo
        peek dlq
        create sd
        create s dlq=sd:1
        delete sd
        create sd fifo
        send s body=b
        recv s
        nack s r2
        peek sd
        peek s
        "#,
        expect![[r#"
            create dlq fifo
              created id=1
            create q.fifo fifo vis=1000 dlq=dlq:1
              created id=2
            delete dlq
              deleted
            create dlq
              created id=3
            send q.fifo body=a group=g dedup=1
              m1 seq=1 visible_at=0
            recv q.fifo
              m1 r1 body=a until=1000 count=1 prio=0 first=0 group=g
            advance 1000
              now=1000
            peek dlq
              (empty)
            peek q.fifo
              m1 Visible body=a sent=0 count=1 prio=0 first=0 group=g
            delete dlq
              deleted
            create dlq fifo
              created id=4
            recv q.fifo
              (nothing)
            peek dlq
              m1 Visible body=a sent=0 count=1 prio=0 first=0 from=q.fifo group=g
            create sd
              created id=5
            create s dlq=sd:1
              created id=6
            delete sd
              deleted
            create sd fifo
              created id=7
            send s body=b
              m2 visible_at=1000
            recv s
              m2 r2 body=b until=31000 count=1 prio=0 first=1000
            nack s r2
              ok
            peek sd
              (empty)
            peek s
              m2 Visible body=b sent=1000 count=1 prio=0 first=1000
        "#]],
    );
}

#[test]
fn fifo_ack_with_an_expired_receipt_is_refused() {
    // a1's hold ended before its consumer acked; a1 must come back in turn rather than be
    // deleted by a consumer that no longer holds the group (SQS: "receipt handle has expired").
    check(
        r#"
        create q fifo vis=1000
        send q body=a1 group=a dedup=1
        send q body=a2 group=a dedup=2
        recv q max=1
        advance 1000
        ack q r1
        recv q max=10
        "#,
        expect![[r#"
            create q fifo vis=1000
              created id=1
            send q body=a1 group=a dedup=1
              m1 seq=1 visible_at=0
            send q body=a2 group=a dedup=2
              m2 seq=2 visible_at=0
            recv q max=1
              m1 r1 body=a1 until=1000 count=1 prio=0 first=0 group=a
            advance 1000
              now=1000
            ack q r1
              error NotInFlight
            recv q max=10
              m1 r2 body=a1 until=2000 count=2 prio=0 first=0 group=a
              m2 r3 body=a2 until=2000 count=1 prio=0 first=1000 group=a
        "#]],
    );
}
