//! What can go wrong when talking to a Sluice server, by layer: the server said no (`Api`,
//! `Rejected`), the network failed (`Connect`, `Transport`), or the answer made no sense
//! (`Decode`, `UnexpectedStatus`).

use sluice_api::{ErrorBody, ErrorCode};

/// Every error a [`Client`](crate::Client) call returns.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The server refused the whole request with an error body (`{"error": {...}}`).
    #[error("{message} ({code})")]
    Api {
        /// The HTTP status of the answer.
        status: u16,
        /// The stable error code; see [`ErrorCode`].
        code: String,
        /// What went wrong, for people.
        message: String,
        /// Structured context, such as `{"field": "priority"}`.
        details: Option<serde_json::Value>,
    },
    /// The server accepted the request but refused the single entry a convenience helper sent
    /// (for instance [`Client::send_text`](crate::Client::send_text)).
    #[error("{message} ({code})")]
    Rejected {
        /// The stable error code of the entry; see [`ErrorCode`].
        code: String,
        /// What went wrong, for people.
        message: String,
        /// Structured context.
        details: Option<serde_json::Value>,
    },
    /// No connection could be made; the request was never sent.
    #[error("cannot connect to the server at {url}: {reason}")]
    Connect {
        /// The URL of the request.
        url: String,
        /// The operating system's reason, such as "Connection refused (os error 111)".
        reason: String,
    },
    /// The connection failed or timed out after the request may have been sent.
    #[error("request to {url} failed: {reason}")]
    Transport {
        /// The URL of the request.
        url: String,
        /// What failed.
        reason: String,
        /// True when no answer came within the request's timeout.
        timed_out: bool,
    },
    /// A 2xx answer whose body is not the expected JSON.
    #[error("cannot read the server's answer (HTTP {status}): {reason}")]
    Decode {
        /// The HTTP status of the answer.
        status: u16,
        /// Why the body could not be decoded.
        reason: String,
    },
    /// A non-2xx answer without a Sluice error body (a proxy in between, or not a Sluice server).
    #[error("unexpected answer from the server: HTTP {status}: {body}")]
    UnexpectedStatus {
        /// The HTTP status of the answer.
        status: u16,
        /// The start of the body, as text.
        body: String,
    },
    /// The base URL given to the client cannot be used.
    #[error("invalid server URL {url:?}: {reason}")]
    InvalidUrl {
        /// The URL as given.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
}

impl ClientError {
    /// The error code of an `Api` or `Rejected` error, when it is one this client knows.
    pub fn code(&self) -> Option<ErrorCode> {
        self.code_str().and_then(ErrorCode::parse)
    }

    /// The error code as the server sent it, known or not.
    pub fn code_str(&self) -> Option<&str> {
        match self {
            ClientError::Api { code, .. } | ClientError::Rejected { code, .. } => Some(code),
            _ => None,
        }
    }

    /// The HTTP status, for errors that carry one.
    pub fn status(&self) -> Option<u16> {
        match self {
            ClientError::Api { status, .. }
            | ClientError::Decode { status, .. }
            | ClientError::UnexpectedStatus { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// True when the server could not be reached at all (nothing listens, wrong host).
    pub fn is_connect(&self) -> bool {
        matches!(self, ClientError::Connect { .. })
    }

    pub(crate) fn from_entry(body: ErrorBody) -> ClientError {
        ClientError::Rejected { code: body.code, message: body.message, details: body.details }
    }
}
