//! Queue names: 1 to 80 characters of ASCII letters, digits, `-` and `_`, as in SQS.

use crate::limits::QUEUE_NAME_LEN_MAX;
use crate::validation::ValidationError;

pub fn validate_queue_name(name: &str) -> Result<(), ValidationError> {
    if name.is_empty() || name.len() > QUEUE_NAME_LEN_MAX {
        return Err(ValidationError::new("name", format!("queue names are 1 to {QUEUE_NAME_LEN_MAX} characters long")));
    }
    if let Some(bad) = name.chars().find(|c| !(c.is_ascii_alphanumeric() || *c == '-' || *c == '_')) {
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
        assert!(validate_queue_name("dot.fifo").is_err());
        assert!(validate_queue_name("é").is_err());
    }
}
