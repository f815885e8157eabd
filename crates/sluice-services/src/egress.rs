//! Egress rules: where the server's own outbound calls (HTTP push, alert webhooks, job
//! completion webhooks, saga HTTP steps) may go.
//!
//! Never to link-local addresses, which hold cloud metadata services (169.254.0.0/16,
//! fe80::/10, IPv4-mapped forms included): a subscription cannot turn the broker into a way to
//! read its host's credentials. `--egress-deny` adds CIDRs or host patterns to refuse;
//! `--egress-allow`, when given, lets calls go only to matching hosts or addresses. A host name
//! is checked by name and then by every address it resolves to (in the clients' resolver, so a
//! name that resolves to a refused address is refused however it was spelled, and redirects are
//! checked the same way); a URL with an address in it is checked before the call. A refused
//! call fails like an unreachable endpoint, with the reason in its error (a push delivery's
//! last error, a saga step's error), so it is retried and dead-lettered, never dropped.

use std::net::{IpAddr, SocketAddr};
use std::str::FromStr;
use std::sync::Arc;

use ipnet::IpNet;

/// Link-local ranges no outbound call may reach, whatever the rules.
pub const ALWAYS_DENIED: [&str; 2] = ["169.254.0.0/16", "fe80::/10"];
/// Longest host pattern, in bytes.
pub const HOST_PATTERN_LEN_MAX: usize = 253;

/// One `--egress-allow` or `--egress-deny` value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rule {
    /// A CIDR (`10.0.0.0/8`, `fd00::/8`) or one address.
    Net(IpNet),
    /// A host name, where `*` is any run of characters (`*.internal`, `hooks.example.com`),
    /// compared without case.
    Host(String),
}

impl FromStr for Rule {
    type Err = String;

    fn from_str(s: &str) -> Result<Rule, String> {
        let s = s.trim();
        if let Ok(net) = s.parse::<IpNet>() {
            return Ok(Rule::Net(net));
        }
        if let Ok(ip) = s.parse::<IpAddr>() {
            return Ok(Rule::Net(IpNet::from(ip)));
        }
        let ok = !s.is_empty()
            && s.len() <= HOST_PATTERN_LEN_MAX
            && s.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'*' | b'_'));
        if ok {
            Ok(Rule::Host(s.to_ascii_lowercase()))
        } else {
            Err(format!("{s:?} is neither a CIDR (10.0.0.0/8), an address, nor a host pattern (*.internal)"))
        }
    }
}

/// The rules of one server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Egress {
    allow: Vec<Rule>,
    deny: Vec<Rule>,
    always: Vec<IpNet>,
}

impl Default for Egress {
    /// Only the link-local ranges refused.
    fn default() -> Egress {
        Egress::new(Vec::new(), Vec::new())
    }
}

/// Why a call was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("egress refused: {0}")]
pub struct Refused(pub String);

impl Egress {
    pub fn new(allow: Vec<Rule>, deny: Vec<Rule>) -> Egress {
        let always = ALWAYS_DENIED.iter().map(|n| n.parse().expect("a valid CIDR")).collect();
        Egress { allow, deny, always }
    }

    /// Whether calls may go to `host` by its name: `Err` when a deny pattern matches, else
    /// whether an allow pattern does (then every address it resolves to, outside the refused
    /// ranges, may be called).
    fn by_name(&self, host: &str) -> Result<bool, Refused> {
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        let matching = |rules: &[Rule]| rules.iter().any(|r| matches!(r, Rule::Host(p) if glob(p, &host)));
        if matching(&self.deny) {
            return Err(Refused(format!("{host} matches --egress-deny")));
        }
        Ok(matching(&self.allow))
    }

    /// Whether calls may go to `ip`, for a host allowed by name or not.
    fn address(&self, ip: IpAddr, allowed_by_name: bool) -> Result<(), Refused> {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        if self.always.iter().any(|n| n.contains(&ip)) {
            return Err(Refused(format!("{ip} is link-local (cloud metadata lives there)")));
        }
        let in_nets = |rules: &[Rule]| rules.iter().any(|r| matches!(r, Rule::Net(n) if n.contains(&ip)));
        if in_nets(&self.deny) {
            return Err(Refused(format!("{ip} is in --egress-deny")));
        }
        if self.allow.is_empty() || allowed_by_name || in_nets(&self.allow) {
            Ok(())
        } else {
            Err(Refused(format!("{ip} is outside --egress-allow")))
        }
    }

    /// Checks a URL before a call: its host by name, or the address written in it. A name's
    /// addresses are checked when it is resolved ([`Egress::client`]).
    pub fn check_url(&self, url: &str) -> Result<(), Refused> {
        let parsed = reqwest::Url::parse(url).map_err(|e| Refused(format!("{url} is not a URL: {e}")))?;
        match parsed.host() {
            Some(url::Host::Ipv4(ip)) => self.address(IpAddr::V4(ip), false),
            Some(url::Host::Ipv6(ip)) => self.address(IpAddr::V6(ip), false),
            Some(url::Host::Domain(name)) => {
                let by_name = self.by_name(name)?;
                // A name that is an address in another spelling (such as a decimal integer)
                // is parsed as one by the URL parser already; what is left is a name.
                if !by_name && !self.allow.is_empty() && !self.allow.iter().any(|r| matches!(r, Rule::Net(_))) {
                    return Err(Refused(format!("{name} is outside --egress-allow")));
                }
                Ok(())
            }
            None => Err(Refused(format!("{url} has no host"))),
        }
    }

    /// `builder` with these rules: its resolver drops refused addresses (and fails when none is
    /// left), redirects are checked as the first URL is, and no proxy is used (a proxy would
    /// make the rules about the proxy).
    pub fn client(self: &Arc<Self>, builder: reqwest::ClientBuilder) -> reqwest::ClientBuilder {
        let redirects = Arc::clone(self);
        builder.no_proxy().dns_resolver(Arc::new(Resolver(Arc::clone(self)))).redirect(
            reqwest::redirect::Policy::custom(move |attempt| {
                if attempt.previous().len() >= 10 {
                    attempt.error("more than 10 redirects")
                } else if let Err(refused) = redirects.check_url(attempt.url().as_str()) {
                    attempt.error(refused)
                } else {
                    attempt.follow()
                }
            }),
        )
    }
}

/// The clients' resolver: the system's, with refused addresses taken out.
struct Resolver(Arc<Egress>);

impl reqwest::dns::Resolve for Resolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let egress = Arc::clone(&self.0);
        let host = name.as_str().to_string();
        Box::pin(async move {
            let by_name = egress.by_name(&host)?;
            let found: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let mut last = None;
            let kept: Vec<SocketAddr> = found
                .into_iter()
                .filter(|a| match egress.address(a.ip(), by_name) {
                    Ok(()) => true,
                    Err(e) => {
                        last = Some(e);
                        false
                    }
                })
                .collect();
            if kept.is_empty() {
                let why = last.map_or_else(|| "it resolves to no address".to_string(), |e| e.0);
                return Err(Box::new(Refused(format!("{host}: {why}"))) as Box<dyn std::error::Error + Send + Sync>);
            }
            Ok(Box::new(kept.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

/// `*` as any run of characters; the rest compared as is.
fn glob(pattern: &str, text: &str) -> bool {
    crate::auth::scope::matches(pattern, text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(texts: &[&str]) -> Vec<Rule> {
        texts.iter().map(|t| t.parse().unwrap()).collect()
    }

    #[test]
    fn link_local_addresses_are_refused_whatever_the_rules() {
        let open = Egress::default();
        for url in [
            "http://169.254.169.254/latest/meta-data/",
            "http://[fe80::1]/",
            "http://[::ffff:169.254.169.254]/",
            "http://2852039166/",
        ] {
            assert!(open.check_url(url).is_err(), "{url}");
        }
        for url in ["http://127.0.0.1:8080/hook", "https://hooks.example.com/x", "http://[::1]/"] {
            assert_eq!(open.check_url(url), Ok(()), "{url}");
        }
        let allow_all = Egress::new(rules(&["0.0.0.0/0", "::/0"]), Vec::new());
        assert!(allow_all.check_url("http://169.254.169.254/").is_err());
    }

    #[test]
    fn deny_and_allow_rules_take_cidrs_and_host_patterns() {
        let egress = Egress::new(rules(&["10.0.0.0/8", "*.example.com"]), rules(&["10.9.0.0/16", "evil.example.com"]));
        assert_eq!(egress.check_url("http://10.1.2.3/"), Ok(()));
        assert!(egress.check_url("http://10.9.1.1/").unwrap_err().0.contains("--egress-deny"));
        assert!(egress.check_url("http://192.168.1.1/").unwrap_err().0.contains("outside --egress-allow"));
        assert_eq!(egress.check_url("https://hooks.example.com/"), Ok(()));
        assert_eq!(egress.check_url("https://HOOKS.Example.com./"), Ok(()));
        assert!(egress.check_url("https://evil.example.com/").unwrap_err().0.contains("--egress-deny"));
        // A name outside the patterns may still resolve into an allowed CIDR: the resolver
        // decides by address.
        assert_eq!(egress.check_url("https://other.test/"), Ok(()));
        assert_eq!(egress.address("10.2.2.2".parse().unwrap(), false), Ok(()));
        assert!(egress.address("8.8.8.8".parse().unwrap(), false).is_err());
        assert_eq!(egress.address("8.8.8.8".parse().unwrap(), true), Ok(()));

        let names_only = Egress::new(rules(&["hooks.example.com"]), Vec::new());
        assert!(names_only.check_url("https://other.test/").unwrap_err().0.contains("outside --egress-allow"));
        assert!("not a rule!".parse::<Rule>().is_err());
        assert_eq!("192.168.0.1".parse::<Rule>(), Ok(Rule::Net("192.168.0.1/32".parse().unwrap())));
    }

    #[tokio::test]
    async fn the_resolver_refuses_a_name_whose_every_address_is_refused() {
        use reqwest::dns::Resolve;
        let egress = Arc::new(Egress::new(Vec::new(), rules(&["127.0.0.0/8", "::1/128"])));
        let resolver = Resolver(Arc::clone(&egress));
        let refused = resolver.resolve("localhost".parse().unwrap()).await.err().expect("localhost is denied");
        assert!(refused.to_string().contains("--egress-deny"), "{refused}");
        let open = Resolver(Arc::new(Egress::default()));
        assert!(open.resolve("localhost".parse().unwrap()).await.is_ok());
    }
}
