//! Queue names: 1 to 80 characters of ASCII letters, digits, `-` and `_`, optionally ending in
//! `.fifo` (which only FIFO queues may), as in SQS.

use crate::limits::{FIFO_SUFFIX, QUEUE_NAME_LEN_MAX};
use crate::validation::ValidationError;

pub fn validate_queue_name(name: &str) -> Result<(), ValidationError> {
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
    }
}
