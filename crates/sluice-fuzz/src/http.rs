//! Raw HTTP/1.1 request bytes → the server's router, in process, on a current-thread runtime.
//!
//! Parsing uses `httparse`, the parser hyper itself uses, so that what reaches the router is
//! what a real connection would deliver; input that hyper would refuse is skipped.

use std::sync::{Arc, OnceLock};

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderName, HeaderValue, Method, Request, Uri};
use sluice_server::{AccessKey, ServerConfig};
use tower::ServiceExt;

use crate::store::ParseOnlyStore;

/// Most headers a fuzzed request may carry (hyper's default is 100).
const HEADERS_MAX: usize = 100;

#[derive(Clone, Copy)]
pub enum Keys {
    /// Any request is accepted, signed or not.
    None,
    /// Requests must be signed with the key `AKIDFUZZ` / `secret`.
    Verify,
    /// Native calls need an API key (the admin token `ADMIN_TOKEN`, or a stored key, of which
    /// the parse-only store holds none).
    Bearer,
}

/// The bootstrap admin token of the [`Keys::Bearer`] router.
pub const ADMIN_TOKEN: &str = "fuzz-admin-token-0123456789abcdef";

fn router(keys: Keys) -> Router {
    static OPEN: OnceLock<Router> = OnceLock::new();
    static VERIFYING: OnceLock<Router> = OnceLock::new();
    static BEARER: OnceLock<Router> = OnceLock::new();
    let build = |access_keys: Vec<AccessKey>| {
        let config = ServerConfig { access_keys, ..ServerConfig::default() };
        sluice_server::app_with(Arc::new(ParseOnlyStore), config)
    };
    match keys {
        Keys::None => OPEN.get_or_init(|| build(Vec::new())).clone(),
        Keys::Verify => {
            VERIFYING.get_or_init(|| build(vec!["AKIDFUZZ:secret".parse().expect("a valid access key")])).clone()
        }
        Keys::Bearer => BEARER
            .get_or_init(|| {
                let auth = sluice_server::auth_settings::AuthConfig {
                    admin_token: Some(ADMIN_TOKEN.to_string()),
                    disabled: false,
                };
                sluice_server::app_with(Arc::new(ParseOnlyStore), ServerConfig { auth, ..ServerConfig::default() })
            })
            .clone(),
    }
}

thread_local! {
    static RUNTIME: tokio::runtime::Runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a current-thread runtime");
}

/// `SLUICE_FUZZ_VERBOSE=1` prints every answer, to see how far seeds get.
fn verbose() -> bool {
    static VERBOSE: OnceLock<bool> = OnceLock::new();
    *VERBOSE.get_or_init(|| std::env::var_os("SLUICE_FUZZ_VERBOSE").is_some())
}

/// The body of a raw request, if its head parses.
pub fn body_of(data: &[u8]) -> Option<&[u8]> {
    let mut headers = [httparse::EMPTY_HEADER; HEADERS_MAX];
    let mut request = httparse::Request::new(&mut headers);
    match request.parse(data) {
        Ok(httparse::Status::Complete(head_len)) => Some(&data[head_len..]),
        _ => None,
    }
}

/// Sends one raw request through the router and reads the whole answer.
pub fn serve(data: &[u8], keys: Keys) {
    let Some(request) = build(data) else { return };
    RUNTIME.with(|runtime| {
        runtime.block_on(async {
            let response = router(keys).oneshot(request).await.expect("the router is infallible");
            let status = response.status();
            let body = axum::body::to_bytes(response.into_body(), usize::MAX).await.unwrap_or_default();
            if verbose() {
                eprintln!("{status} {}", String::from_utf8_lossy(&body[..body.len().min(300)]));
            }
            assert!(!status.is_server_error(), "a hostile request got {status}: {}", String::from_utf8_lossy(&body));
        });
    });
}

fn build(data: &[u8]) -> Option<Request<Body>> {
    let mut headers = [httparse::EMPTY_HEADER; HEADERS_MAX];
    let mut parsed = httparse::Request::new(&mut headers);
    let httparse::Status::Complete(head_len) = parsed.parse(data).ok()? else { return None };
    let method = Method::from_bytes(parsed.method?.as_bytes()).ok()?;
    let uri: Uri = parsed.path?.parse().ok()?;
    let mut request = Request::builder().method(method).uri(uri);
    for header in parsed.headers.iter() {
        let name = HeaderName::from_bytes(header.name.as_bytes()).ok()?;
        let value = HeaderValue::from_bytes(header.value).ok()?;
        request = request.header(name, value);
    }
    request.body(Body::from(data[head_len..].to_vec())).ok()
}
