//! Why a filter policy is refused, in the words SNS uses.
//!
//! SNS answers a bad policy with `InvalidParameter` (HTTP 400) and the message
//! `Invalid parameter: FilterPolicy: <reason>` (`Invalid parameter: Attributes Reason:
//! FilterPolicy: <reason>` from `Subscribe`). [`FilterPolicyError`] displays the `<reason>`;
//! [`FilterPolicyError::sns_message`] builds the whole message.
//!
//! Where each reason comes from (AWS appends a Jackson parser location, `\n at [Source: …;
//! line: 1, column: 10]`, to most grammar errors; Sluice does not):
//!
//! | Reason | Source |
//! |---|---|
//! | `failed to parse JSON. <detail>` | prefix recorded from AWS; the detail is `serde_json`'s, not Jackson's |
//! | `Filter policy can not have more than 5 keys` | recorded from AWS |
//! | `Filter policy is too complex` | recorded from AWS |
//! | `Filter policy scope MessageAttributes does not support nested filter policy` | recorded from AWS (SNS puts no `FilterPolicy: ` before it) |
//! | `"<key>" must be an object or an array` | recorded from AWS |
//! | `Match value must be String, number, true, false, or null` | recorded from AWS |
//! | `Unrecognized match type <name>` | recorded from AWS |
//! | `Only one key allowed in match expression` | recorded from AWS |
//! | `prefix match pattern must be a string`, `suffix …` | recorded from AWS (also for `cidr`, as AWS does) |
//! | `equals-ignore-case match pattern must be a string` | AWS event-ruler (the engine whose other messages SNS gives) |
//! | `exists match pattern must be either true or false.` | recorded from AWS |
//! | `Unsupported anything-but pattern: <name>` | recorded from AWS |
//! | `Invalid member in numeric match: <token>` | recorded from AWS |
//! | `Unrecognized numeric range operator: <op>` | recorded from AWS |
//! | `Value of equals must be numeric`, `Value of <op> must be numeric` | recorded from AWS |
//! | `Too many elements in numeric expression` | recorded from AWS |
//! | `Bad value in numeric range: <token>` | recorded from AWS |
//! | `Bad numeric range operator: <op>` | recorded from AWS |
//! | `Bottom must be less than top` | recorded from AWS |
//! | `Too many terms in numeric range expression` | recorded from AWS |
//! | `Filter is not an object`, `Empty arrays are not allowed`, `Empty objects are not allowed`, `Match expression name not found`, `Anything-But expression name not found`, `Null prefix/suffix not allowed`, `Value of numeric must be an array.`, `Value of anything-but must be an array or single string/number value.`, `Inside anything but list, start\|null\|boolean is not supported.`, `Inside anything but list, either all values are number or string, mixed type is not supported`, `Inside anything-but/equals-ignore-case list, number\|start\|null\|boolean is not supported.`, `Malformed CIDR, one '/' required`, `Malformed CIDR, mask bits must be an integer`, `Malformed CIDR, mask bits must not be negative`, `Nonstandard IP address: <ip>` | AWS event-ruler, not recorded against SNS |
//! | `Value must be between -1.0E9 and 1.0E9, inclusive` | event-ruler's sentence with SNS's documented bounds |
//! | `IPv4 mask bits must be at most 32`, `IPv6 mask bits must be at most 128`, `Filter policy can not be larger than 262144 bytes` | Sluice's wording |

use crate::limits::{FILTER_POLICY_BYTES_MAX, FILTER_POLICY_KEYS_MAX};

/// A filter policy SNS would refuse. `Display` gives the reason SNS puts after
/// `Invalid parameter: FilterPolicy: `.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FilterPolicyError {
    /// The text is not JSON.
    #[error("failed to parse JSON. {detail}")]
    Json { detail: String },
    /// The text is longer than [`FILTER_POLICY_BYTES_MAX`].
    #[error("Filter policy can not be larger than {FILTER_POLICY_BYTES_MAX} bytes")]
    TooLarge { bytes: usize },
    /// The JSON breaks the policy grammar; `reason` is SNS's sentence for it.
    #[error("{reason}")]
    Invalid { reason: String },
    /// A nested object in a policy whose scope is `MessageAttributes` (attributes are flat).
    #[error("Filter policy scope MessageAttributes does not support nested filter policy")]
    NestedInAttributesScope,
    /// More than [`FILTER_POLICY_KEYS_MAX`] keys.
    #[error("Filter policy can not have more than {FILTER_POLICY_KEYS_MAX} keys")]
    TooManyKeys { keys: usize },
    /// More than [`crate::limits::FILTER_POLICY_COMBINATIONS_MAX`] value combinations.
    #[error("Filter policy is too complex")]
    TooComplex { combinations: u64 },
}

/// The SNS call that carried the policy, which decides how SNS frames the error message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SnsCall {
    /// `Subscribe` with `Attributes.FilterPolicy`.
    Subscribe,
    /// `SetSubscriptionAttributes` with `AttributeName=FilterPolicy`.
    SetSubscriptionAttributes,
}

impl FilterPolicyError {
    pub(crate) fn invalid(reason: impl Into<String>) -> Self {
        FilterPolicyError::Invalid { reason: reason.into() }
    }

    /// The whole `InvalidParameter` message SNS returns for this error, e.g.
    /// `Invalid parameter: FilterPolicy: Filter policy is too complex`.
    pub fn sns_message(&self, call: SnsCall) -> String {
        let lead = match call {
            SnsCall::Subscribe => "Invalid parameter: Attributes Reason: ",
            SnsCall::SetSubscriptionAttributes => "Invalid parameter: ",
        };
        match self {
            // Recorded from SetSubscriptionAttributes: this one is not under `FilterPolicy: `.
            FilterPolicyError::NestedInAttributesScope => format!("{lead}{self}"),
            _ => format!("{lead}FilterPolicy: {self}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sns_messages_are_framed_as_sns_frames_them() {
        let complex = FilterPolicyError::TooComplex { combinations: 151 };
        assert_eq!(
            complex.sns_message(SnsCall::SetSubscriptionAttributes),
            "Invalid parameter: FilterPolicy: Filter policy is too complex"
        );
        assert_eq!(
            complex.sns_message(SnsCall::Subscribe),
            "Invalid parameter: Attributes Reason: FilterPolicy: Filter policy is too complex"
        );
        assert_eq!(
            FilterPolicyError::NestedInAttributesScope.sns_message(SnsCall::SetSubscriptionAttributes),
            "Invalid parameter: Filter policy scope MessageAttributes does not support nested filter policy"
        );
        assert_eq!(
            FilterPolicyError::TooManyKeys { keys: 6 }.sns_message(SnsCall::Subscribe),
            "Invalid parameter: Attributes Reason: FilterPolicy: Filter policy can not have more than 5 keys"
        );
    }
}
