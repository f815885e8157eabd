//! The commands of `sluice`, one file each, and what they share: how to reach the server and
//! how to parse durations, tags and attributes from flags.

mod ack;
mod alert;
mod bench;
mod dlq;
mod events;
mod job;
mod key;
mod migrate;
mod peek;
mod queue;
mod receive;
mod relay;
mod saga;
mod schedule;
mod schema;
mod send;
mod serve;
mod stream;
mod tenant;
mod topic;
mod trace;

use anyhow::Result;
use clap::Subcommand;
use sluice_client::Client;

#[derive(Debug, Subcommand)]
pub enum Command {
    Serve(serve::Args),
    Queue(queue::Args),
    Send(send::Args),
    Receive(receive::Args),
    Ack(ack::Args),
    Peek(peek::Args),
    Dlq(dlq::Args),
    Topic(topic::Args),
    Schedule(schedule::Args),
    Schema(schema::Args),
    Stream(stream::Args),
    Events(events::Args),
    Alert(alert::Args),
    Relay(relay::Args),
    Job(job::Args),
    Saga(saga::Args),
    Trace(trace::Args),
    Key(key::Args),
    Tenant(tenant::Args),
    // Boxed: the benchmark's many flags would make every command as large as it.
    Bench(Box<bench::Args>),
    Migrate(migrate::Args),
}

impl Command {
    pub async fn run(self) -> Result<()> {
        match self {
            Command::Serve(args) => serve::run(args).await,
            Command::Queue(args) => queue::run(args).await,
            Command::Send(args) => send::run(args).await,
            Command::Receive(args) => receive::run(args).await,
            Command::Ack(args) => ack::run(args).await,
            Command::Peek(args) => peek::run(args).await,
            Command::Dlq(args) => dlq::run(args).await,
            Command::Topic(args) => topic::run(args).await,
            Command::Schedule(args) => schedule::run(args).await,
            Command::Schema(args) => schema::run(args).await,
            Command::Stream(args) => stream::run(args).await,
            Command::Events(args) => events::run(args).await,
            Command::Alert(args) => alert::run(args).await,
            Command::Relay(args) => relay::run(args).await,
            Command::Job(args) => job::run(args).await,
            Command::Saga(args) => saga::run(args).await,
            Command::Trace(args) => trace::run(args).await,
            Command::Key(args) => key::run(args).await,
            Command::Tenant(args) => tenant::run(args).await,
            Command::Bench(args) => bench::run(*args).await,
            Command::Migrate(args) => migrate::run(args).await,
        }
    }
}

/// Flags every client command takes.
#[derive(Debug, Clone, clap::Args)]
pub struct ClientArgs {
    /// URL of the Sluice server.
    #[arg(long, env = "SLUICE_SERVER", default_value = "http://127.0.0.1:9324", value_name = "URL")]
    pub server: String,
    /// The API key to call with (`slk_...`, or the server's admin key), once the server has
    /// keys.
    #[arg(long = "api-key", env = "SLUICE_KEY", value_name = "KEY", hide_env_values = true)]
    pub api_key: Option<ApiKey>,
    /// A CA certificate (PEM) to trust for an https:// server, such as the self-signed
    /// certificate it was started with (--tls-cert).
    #[arg(long, env = "SLUICE_CA_CERT", value_name = "FILE")]
    pub ca_cert: Option<std::path::PathBuf>,
    /// Print the API's JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// An API key given on the command line, kept out of debug output.
#[derive(Clone)]
pub struct ApiKey(String);

impl std::str::FromStr for ApiKey {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(ApiKey(s.trim().to_owned()))
    }
}

impl std::fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<redacted>")
    }
}

impl ClientArgs {
    pub fn client(&self) -> Result<Client> {
        let mut builder = Client::builder(&self.server);
        if let Some(ApiKey(key)) = &self.api_key {
            builder = builder.api_key(key.clone());
        }
        if let Some(path) = &self.ca_cert {
            let pem = std::fs::read(path).map_err(|e| {
                crate::report::hinted(
                    format!("cannot read --ca-cert {}: {e}", path.display()),
                    "give the PEM file of the server's CA",
                )
            })?;
            builder = builder.ca_certificate(pem);
        }
        Ok(builder.build()?)
    }
}

/// A duration such as `30s`, `1m 30s`, `4d` or `0`, in milliseconds.
pub fn parse_duration_ms(s: &str) -> Result<u64, String> {
    let duration =
        humantime::parse_duration(s).map_err(|e| format!("{e}; write durations like 30s, 5m, 1h30m or 4d"))?;
    u64::try_from(duration.as_millis()).map_err(|_| "too long".to_owned())
}

/// `key=value`.
pub fn parse_tag(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((key, value)) if !key.is_empty() => Ok((key.to_owned(), value.to_owned())),
        _ => Err(format!("{s:?} is not KEY=VALUE")),
    }
}

/// `name=Type:value`, where Type is String, Number or Binary (optionally `.label`; topics also
/// take String.Array, a JSON array) and a Binary value is base64.
pub fn parse_attribute(s: &str) -> Result<(String, sluice_api::Attribute), String> {
    let usage = || format!("{s:?} is not NAME=TYPE:VALUE (e.g. kind=String:invoice, n=Number:3)");
    let (name, typed) = s.split_once('=').ok_or_else(usage)?;
    let (data_type, value) = typed.split_once(':').ok_or_else(usage)?;
    if name.is_empty() || data_type.is_empty() {
        return Err(usage());
    }
    let base = data_type.split('.').next().unwrap_or(data_type);
    if !matches!(base, "String" | "Number" | "Binary") {
        return Err(format!("attribute type {data_type:?} is not String, Number or Binary"));
    }
    Ok((name.to_owned(), sluice_api::Attribute { data_type: data_type.to_owned(), value: value.to_owned() }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_parse_or_say_how_to_write_them() {
        assert_eq!(parse_duration_ms("30s"), Ok(30_000));
        assert_eq!(parse_duration_ms("1m 30s"), Ok(90_000));
        assert_eq!(parse_duration_ms("0"), Ok(0));
        assert!(parse_duration_ms("30").unwrap_err().contains("30s"));
        assert_eq!(parse_tag("team=core"), Ok(("team".into(), "core".into())));
        assert_eq!(parse_tag("a=b=c"), Ok(("a".into(), "b=c".into())));
        assert!(parse_tag("team").is_err());
        let (name, attribute) = parse_attribute("url=String:http://x").unwrap();
        assert_eq!(
            (name.as_str(), attribute.data_type.as_str(), attribute.value.as_str()),
            ("url", "String", "http://x")
        );
        assert_eq!(parse_attribute("n=Number.int:3").unwrap().1.data_type, "Number.int");
        assert!(parse_attribute("n=Float:3").is_err());
        assert!(parse_attribute("n:3").is_err());
    }
}
