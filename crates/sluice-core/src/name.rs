//! Queue names: 1 to 80 characters of ASCII letters, digits, `-` and `_`, optionally ending in
//! `.fifo` (which only FIFO queues may), as in SQS; and tenants, the namespaces names live in.
//!
//! A tenant's resources are stored under `<tenant>~<name>`. No name a client gives may hold
//! `~`, so one tenant's names never meet another's, and the default tenant's are stored as
//! given (what existed before tenants stays where it was). [`Namespace`] turns a client's
//! name into the stored one and back; only the HTTP edge (native, SQS, SNS) uses it.

use crate::limits::{FIFO_SUFFIX, QUEUE_NAME_LEN_MAX};
use crate::validation::ValidationError;

/// Separates a tenant from a resource's own name in a stored name: `acme~orders`.
pub const TENANT_SEPARATOR: char = '~';
/// Longest tenant name (`[a-z0-9-]`, starting with a letter or digit).
pub const TENANT_LEN_MAX: usize = 63;
/// The tenant of keys made without one, of the bootstrap admin token, and of every call when
/// authentication is off. Its names are stored without a prefix.
pub const DEFAULT_TENANT: &str = "default";

/// Checks a tenant name: 1 to `TENANT_LEN_MAX` of `[a-z0-9-]`, starting with a letter or digit.
pub fn validate_tenant(tenant: &str) -> Result<(), ValidationError> {
    let ok = !tenant.is_empty()
        && tenant.len() <= TENANT_LEN_MAX
        && !tenant.starts_with('-')
        && tenant.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(ValidationError::new(
            "tenant",
            format!("a tenant is 1 to {TENANT_LEN_MAX} of [a-z0-9-], starting with a letter or digit"),
        ))
    }
}

/// The namespace of one tenant: how its clients' names are stored.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Namespace {
    /// `None` for the default tenant.
    tenant: Option<String>,
}

impl Namespace {
    /// The namespace of `tenant` (the default tenant's for [`DEFAULT_TENANT`]).
    pub fn of(tenant: &str) -> Namespace {
        Namespace { tenant: (tenant != DEFAULT_TENANT).then(|| tenant.to_string()) }
    }

    /// The namespace a stored name lives in (`acme`'s for `acme~orders`).
    pub fn of_stored(stored: &str) -> Namespace {
        Namespace::of(split_tenant(stored).0)
    }

    /// The tenant's name.
    pub fn tenant(&self) -> &str {
        self.tenant.as_deref().unwrap_or(DEFAULT_TENANT)
    }

    pub fn is_default(&self) -> bool {
        self.tenant.is_none()
    }

    /// What every stored name of this tenant starts with (empty for the default tenant, whose
    /// stored names are those without a separator).
    pub fn prefix(&self) -> String {
        self.tenant.as_ref().map(|t| format!("{t}{TENANT_SEPARATOR}")).unwrap_or_default()
    }

    /// The stored name of a client's `name`. A name holding the separator is refused, so that no
    /// client can reach into another tenant by spelling its prefix.
    pub fn qualify(&self, field: &str, name: &str) -> Result<String, ValidationError> {
        if name.contains(TENANT_SEPARATOR) {
            return Err(ValidationError::new(field, format!("names may not hold '{TENANT_SEPARATOR}'")));
        }
        Ok(format!("{}{name}", self.prefix()))
    }

    /// The client's name of a stored one, if it is this tenant's.
    pub fn local<'a>(&self, stored: &'a str) -> Option<&'a str> {
        match &self.tenant {
            None => (!stored.contains(TENANT_SEPARATOR)).then_some(stored),
            Some(t) => stored.strip_prefix(t.as_str())?.strip_prefix(TENANT_SEPARATOR),
        }
    }

    /// [`Namespace::local`] for a name known to be this tenant's (one the store gave back for a
    /// qualified name); a foreign one is shown whole rather than dropped.
    pub fn show(&self, stored: &str) -> String {
        self.local(stored).unwrap_or(stored).to_string()
    }
}

/// A resource's metric labels: `key` with the name within its tenant, then `tenant` unless it
/// is the default one (whose series keep the labels they had before tenants).
pub fn resource_labels(key: &'static str, stored: &str) -> Vec<(&'static str, String)> {
    let (tenant, name) = split_tenant(stored);
    let mut labels = vec![(key, name.to_string())];
    if tenant != DEFAULT_TENANT {
        labels.push(("tenant", tenant.to_string()));
    }
    labels
}

/// The tenant of a stored name, and the name within it.
pub fn split_tenant(stored: &str) -> (&str, &str) {
    stored.split_once(TENANT_SEPARATOR).unwrap_or((DEFAULT_TENANT, stored))
}

/// The name within its tenant of a stored name (`orders` of `acme~orders`, `orders` of
/// `orders`); a prefix that is no tenant name is refused.
pub fn without_tenant(stored: &str) -> Result<&str, ValidationError> {
    match stored.split_once(TENANT_SEPARATOR) {
        Some((tenant, local)) => {
            validate_tenant(tenant).map_err(|e| ValidationError::new("name", e.message))?;
            Ok(local)
        }
        None => Ok(stored),
    }
}

pub fn validate_queue_name(name: &str) -> Result<(), ValidationError> {
    let name = without_tenant(name)?;
    if name.is_empty() || name.len() > QUEUE_NAME_LEN_MAX {
        return Err(ValidationError::new("name", format!("queue names are 1 to {QUEUE_NAME_LEN_MAX} characters long")));
    }
    let base = name.strip_suffix(FIFO_SUFFIX).unwrap_or(name);
    if base.is_empty() {
        return Err(ValidationError::new("name", "a queue name needs characters before .fifo"));
    }
    if let Some(bad) = base.chars().find(|c| !(c.is_ascii_alphanumeric() || *c == '-' || *c == '_')) {
        return Err(ValidationError::new(
            "name",
            format!("queue names may hold only ASCII letters, digits, '-' and '_' (found {bad:?})"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert!(validate_queue_name("orders-v2_eu").is_ok());
        assert!(validate_queue_name(&"a".repeat(80)).is_ok());
        assert_eq!(validate_queue_name("").unwrap_err().field, "name");
        assert!(validate_queue_name(&"a".repeat(81)).is_err());
        assert!(validate_queue_name("has space").is_err());
        assert!(validate_queue_name("dot.fifo").is_ok());
        assert!(validate_queue_name(".fifo").is_err());
        assert!(validate_queue_name("a.b.fifo").is_err());
        assert!(validate_queue_name("dot.other").is_err());
        assert!(validate_queue_name("é").is_err());
        assert!(validate_queue_name("acme~orders").is_ok());
        assert!(validate_queue_name("Acme~orders").is_err());
        assert!(validate_queue_name("acme~a~b").is_err());
        assert!(validate_queue_name("acme~").is_err());
    }

    #[test]
    fn namespaces() {
        let acme = Namespace::of("acme");
        let default = Namespace::of(DEFAULT_TENANT);
        assert!(default.is_default());
        assert_eq!(acme.qualify("name", "orders").unwrap(), "acme~orders");
        assert_eq!(default.qualify("name", "orders").unwrap(), "orders");
        assert_eq!(default.qualify("name", "acme~orders").unwrap_err().field, "name");
        assert!(acme.qualify("name", "beta~orders").is_err());
        assert_eq!(acme.local("acme~orders"), Some("orders"));
        assert_eq!(acme.local("orders"), None);
        assert_eq!(acme.local("acmez~orders"), None);
        assert_eq!(acme.local("acme-x~orders"), None);
        assert_eq!(default.local("orders"), Some("orders"));
        assert_eq!(default.local("acme~orders"), None);
        assert_eq!(split_tenant("acme~orders"), ("acme", "orders"));
        assert_eq!(split_tenant("orders"), (DEFAULT_TENANT, "orders"));
    }
}
