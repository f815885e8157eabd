//! The error every validation returns: which field is wrong, and why, in words a user can act on.

/// A request field that breaks a rule. `field` is the native API's name for it (dotted for
/// nested fields, e.g. `dead_letter.max_receive_count` or `messages[3].priority`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct ValidationError {
    pub field: String,
    pub message: String,
}

impl ValidationError {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        ValidationError { field: field.into(), message: message.into() }
    }

    /// The same error, its field placed under `prefix` (e.g. `messages[3]`).
    pub fn within(self, prefix: &str) -> Self {
        ValidationError { field: format!("{prefix}.{}", self.field), message: self.message }
    }
}
