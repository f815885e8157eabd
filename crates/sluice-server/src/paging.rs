//! Paging of list answers: the page token codec every API shares, and the native API's
//! `limit` and `next_token` query parameters. A token is the base64url of the last key
//! returned: opaque to clients, stateless here, and still valid when that item is deleted
//! between pages. The AWS layers (`sqs`, `sns`) write the same tokens but word a bad one in
//! their own errors.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use crate::error::ApiError;

/// An opaque page token for `last`, the last key of a page.
pub fn encode_page_token(last: &str) -> String {
    URL_SAFE_NO_PAD.encode(last.as_bytes())
}

/// The key a page token carries, or `None` when it is not one this server wrote.
pub fn decode_page_token(token: &str) -> Option<String> {
    URL_SAFE_NO_PAD.decode(token.as_bytes()).ok().and_then(|b| String::from_utf8(b).ok())
}

/// Cuts `rows`, fetched with one more than `limit`, to `limit`, and returns the token of the
/// next page when the extra row showed there is one. One extra row tells whether another page
/// exists without a second call.
pub fn cut_page<T>(rows: &mut Vec<T>, limit: usize, key: impl FnOnce(&T) -> String) -> Option<String> {
    if rows.len() <= limit {
        return None;
    }
    rows.truncate(limit);
    rows.last().map(|row| encode_page_token(&key(row)))
}

/// A native list route's paging parameters, checked.
#[derive(Debug)]
pub struct PageRequest {
    /// Items on the page, 1 to the route's maximum.
    pub limit: usize,
    /// The last key of the previous page.
    pub after: Option<String>,
}

impl PageRequest {
    /// Checks `limit` (`limit_default` when absent, 1 to `limit_max`) and then `next_token`.
    pub fn read(
        limit: Option<u32>,
        next_token: Option<&str>,
        limit_default: u32,
        limit_max: usize,
    ) -> Result<PageRequest, ApiError> {
        let limit = limit.unwrap_or(limit_default) as usize;
        if limit == 0 || limit > limit_max {
            return Err(ApiError::invalid("limit", format!("limit must be 1 to {limit_max}")));
        }
        let after = next_token
            .map(|token| {
                decode_page_token(token)
                    .ok_or_else(|| ApiError::invalid("next_token", "next_token is not one this server returned"))
            })
            .transpose()?;
        Ok(PageRequest { limit, after })
    }

    /// How many rows to ask the store for: one more than the page.
    pub fn fetch_count(&self) -> usize {
        self.limit + 1
    }

    /// See [`cut_page`].
    pub fn cut<T>(&self, rows: &mut Vec<T>, key: impl FnOnce(&T) -> String) -> Option<String> {
        cut_page(rows, self.limit, key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_round_trip_and_pages_cut_at_the_limit() {
        assert_eq!(decode_page_token(&encode_page_token("q/1")).as_deref(), Some("q/1"));
        assert_eq!(decode_page_token("***"), None);

        let mut rows = vec!["a", "b", "c"];
        assert_eq!(cut_page(&mut rows, 3, |r| r.to_string()), None);
        assert_eq!(rows, ["a", "b", "c"]);
        assert_eq!(cut_page(&mut rows, 2, |r| r.to_string()), Some(encode_page_token("b")));
        assert_eq!(rows, ["a", "b"]);

        let page = PageRequest::read(None, Some(&encode_page_token("x")), 100, 1_000).unwrap();
        assert_eq!((page.limit, page.after.as_deref(), page.fetch_count()), (100, Some("x"), 101));
        assert!(PageRequest::read(Some(0), None, 100, 1_000).is_err());
        assert!(PageRequest::read(Some(1_001), None, 100, 1_000).is_err());
        assert!(PageRequest::read(Some(5), Some("***"), 100, 1_000).is_err());
    }
}
