//! Authentication of AWS-protocol requests: optional SigV4 verification.
//!
//! With no access keys configured every request is accepted, whatever it is signed with (as
//! ElasticMQ and LocalStack do), so any SDK works out of the box. With keys configured, a
//! request must carry an `Authorization: AWS4-HMAC-SHA256 …` header whose signature matches
//! the one this server computes for the same request with the key's secret. The SigV4 maths
//! (canonical request, string to sign, signing key) is the `aws-sigv4` crate's: this module
//! only rebuilds the request as the client signed it and compares the result.

use std::time::{Duration, SystemTime};

use aws_credential_types::Credentials;
use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings, sign};
use aws_sigv4::sign::v4;
use axum::http::request::Parts;

/// How far a request's signing time may be from the server's clock (AWS uses 15 minutes).
pub const SIGNATURE_SKEW_MS_MAX: u64 = 15 * 60 * 1000;

/// An access key the server verifies SigV4 signatures against.
#[derive(Clone, PartialEq, Eq)]
pub struct AccessKey {
    pub id: String,
    pub secret: String,
}

impl std::fmt::Debug for AccessKey {
    // Never print a secret, not even in debug output.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AccessKey").field("id", &self.id).field("secret", &"<redacted>").finish()
    }
}

impl std::str::FromStr for AccessKey {
    type Err = String;

    /// `ACCESS_KEY_ID:SECRET`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.split_once(':') {
            Some((id, secret)) if !id.is_empty() && !secret.is_empty() => {
                Ok(AccessKey { id: id.to_string(), secret: secret.to_string() })
            }
            _ => Err("an access key is written ACCESS_KEY_ID:SECRET".to_string()),
        }
    }
}

/// Why a request was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    #[error("the request is not signed; sign it with AWS Signature Version 4")]
    MissingSignature,
    #[error("the Authorization header is not a SigV4 header: {0}")]
    Malformed(&'static str),
    #[error("the access key {0} is not known to this server")]
    UnknownAccessKey(String),
    #[error("the request was signed at a time more than 15 minutes from the server's clock")]
    Expired,
    #[error(
        "the request signature we calculated does not match the signature you provided; check your secret access key and signing method"
    )]
    SignatureMismatch,
}

/// The parts of `Authorization: AWS4-HMAC-SHA256 Credential=ID/DATE/REGION/SERVICE/aws4_request,
/// SignedHeaders=a;b, Signature=hex`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SigV4Header<'a> {
    pub access_key_id: &'a str,
    pub date: &'a str,
    pub region: &'a str,
    pub service: &'a str,
    pub signed_headers: Vec<&'a str>,
    pub signature: &'a str,
}

pub fn parse_authorization(value: &str) -> Result<SigV4Header<'_>, AuthError> {
    let rest = value.strip_prefix("AWS4-HMAC-SHA256").ok_or(AuthError::Malformed("unknown algorithm"))?;
    let (mut credential, mut signed_headers, mut signature) = (None, None, None);
    for part in rest.split(',').map(str::trim) {
        if let Some(v) = part.strip_prefix("Credential=") {
            credential = Some(v);
        } else if let Some(v) = part.strip_prefix("SignedHeaders=") {
            signed_headers = Some(v);
        } else if let Some(v) = part.strip_prefix("Signature=") {
            signature = Some(v);
        }
    }
    let credential = credential.ok_or(AuthError::Malformed("no Credential"))?;
    let mut scope = credential.split('/');
    let (Some(access_key_id), Some(date), Some(region), Some(service), Some("aws4_request"), None) =
        (scope.next(), scope.next(), scope.next(), scope.next(), scope.next(), scope.next())
    else {
        return Err(AuthError::Malformed("Credential is not ID/DATE/REGION/SERVICE/aws4_request"));
    };
    Ok(SigV4Header {
        access_key_id,
        date,
        region,
        service,
        signed_headers: signed_headers.ok_or(AuthError::Malformed("no SignedHeaders"))?.split(';').collect(),
        signature: signature.ok_or(AuthError::Malformed("no Signature"))?,
    })
}

/// The service named in a request's SigV4 credential scope (`sqs`, `sns`, `sts`), if signed.
pub fn signing_service(parts: &Parts) -> Option<String> {
    let value = parts.headers.get("authorization")?.to_str().ok()?;
    parse_authorization(value).ok().map(|h| h.service.to_string())
}

/// The request's SigV4 `Authorization` header, parsed.
pub fn signed_header(parts: &Parts) -> Result<SigV4Header<'_>, AuthError> {
    let header = parts.headers.get("authorization").and_then(|v| v.to_str().ok());
    parse_authorization(header.ok_or(AuthError::MissingSignature)?)
}

/// Checks a request signed as `auth` says against `key`'s secret: the signing time within
/// `SIGNATURE_SKEW_MS_MAX` of the server's, the scope's date, and the signature itself
/// (compared in constant time).
pub fn verify(key: &AccessKey, auth: &SigV4Header<'_>, parts: &Parts, body: &[u8]) -> Result<(), AuthError> {
    let amz_date = parts
        .headers
        .get("x-amz-date")
        .and_then(|v| v.to_str().ok())
        .ok_or(AuthError::Malformed("no X-Amz-Date header"))?;
    let signed_at = parse_amz_date(amz_date).ok_or(AuthError::Malformed("X-Amz-Date is not YYYYMMDDTHHMMSSZ"))?;
    let skew = SystemTime::now().duration_since(signed_at).unwrap_or_else(|e| e.duration());
    if skew > Duration::from_millis(SIGNATURE_SKEW_MS_MAX) {
        return Err(AuthError::Expired);
    }
    if !amz_date.starts_with(auth.date) {
        return Err(AuthError::Malformed("the credential scope date is not the X-Amz-Date day"));
    }
    let expected = expected_signature(key, auth, parts, body, signed_at)?;
    if constant_time_eq(expected.as_bytes(), auth.signature.as_bytes()) {
        Ok(())
    } else {
        Err(AuthError::SignatureMismatch)
    }
}

/// The signature `aws-sigv4` computes for the request as the client described it: the same
/// headers (minus `host` and `x-amz-date`, which the signer adds from the URI and the time),
/// the same body hash, scope and time.
fn expected_signature(
    key: &AccessKey,
    auth: &SigV4Header<'_>,
    parts: &Parts,
    body: &[u8],
    signed_at: SystemTime,
) -> Result<String, AuthError> {
    let host = parts.headers.get("host").and_then(|v| v.to_str().ok()).ok_or(AuthError::Malformed("no Host header"))?;
    let path_and_query = parts.uri.path_and_query().map(|p| p.as_str()).unwrap_or("/");
    let uri = format!("http://{host}{path_and_query}");
    let mut headers = Vec::new();
    for name in &auth.signed_headers {
        if matches!(*name, "host" | "x-amz-date") {
            continue;
        }
        for value in parts.headers.get_all(*name) {
            headers.push((*name, value.to_str().map_err(|_| AuthError::Malformed("a signed header is not text"))?));
        }
    }
    let body = match parts.headers.get("x-amz-content-sha256").and_then(|v| v.to_str().ok()) {
        Some("UNSIGNED-PAYLOAD") => SignableBody::UnsignedPayload,
        _ => SignableBody::Bytes(body),
    };
    let request = SignableRequest::new(parts.method.as_str(), uri, headers.into_iter(), body)
        .map_err(|_| AuthError::Malformed("the request cannot be canonicalised"))?;
    let identity = Credentials::new(&key.id, &key.secret, None, None, "sluice").into();
    let mut settings = SigningSettings::default();
    // Only the headers the client listed are passed in, so nothing needs excluding.
    settings.excluded_headers = Some(Vec::new());
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region(auth.region)
        .name(auth.service)
        .time(signed_at)
        .settings(settings)
        .build()
        .map_err(|_| AuthError::Malformed("incomplete signing parameters"))?
        .into();
    let output = sign(request, &params).map_err(|_| AuthError::Malformed("the request cannot be signed"))?;
    Ok(output.signature().to_string())
}

fn parse_amz_date(text: &str) -> Option<SystemTime> {
    let format = time::macros::format_description!("[year][month][day]T[hour][minute][second]Z");
    let at = time::PrimitiveDateTime::parse(text, format).ok()?.assume_utc();
    Some(SystemTime::from(at))
}

/// Compares without stopping at the first difference, so the time taken says nothing about
/// how much of a guessed signature was right.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use axum::http::Request;

    use super::*;

    /// A request checked against static keys as the front door checks them (`aws/access.rs`):
    /// the access key id it was signed with, when it carries one.
    fn authorize(keys: &[AccessKey], parts: &Parts, body: &[u8]) -> Result<Option<String>, AuthError> {
        if keys.is_empty() {
            return Ok(signed_header(parts).ok().map(|h| h.access_key_id.to_string()));
        }
        let auth = signed_header(parts)?;
        let key = keys
            .iter()
            .find(|k| k.id == auth.access_key_id)
            .ok_or_else(|| AuthError::UnknownAccessKey(auth.access_key_id.to_string()))?;
        verify(key, &auth, parts, body)?;
        Ok(Some(key.id.clone()))
    }

    fn keys() -> Vec<AccessKey> {
        vec!["AKIDSLUICE:wJalrXUtnFEMI/K7MDENG".parse().unwrap()]
    }

    /// Signs a request the way an SDK does, with `aws-sigv4`, then splits it into parts.
    fn signed(secret: &str, at: SystemTime, body: &'static str) -> (Parts, &'static [u8]) {
        let identity = Credentials::new("AKIDSLUICE", secret, None, None, "test").into();
        let params = v4::SigningParams::builder()
            .identity(&identity)
            .region("us-east-1")
            .name("sqs")
            .time(at)
            .settings(SigningSettings::default())
            .build()
            .unwrap()
            .into();
        let headers = [
            ("host", "127.0.0.1:9324"),
            ("content-type", "application/x-amz-json-1.0"),
            ("x-amz-target", "AmazonSQS.ListQueues"),
        ];
        let signable = SignableRequest::new(
            "POST",
            "http://127.0.0.1:9324/",
            headers.into_iter(),
            SignableBody::Bytes(body.as_bytes()),
        )
        .unwrap();
        let (instructions, _) = sign(signable, &params).unwrap().into_parts();
        let mut request = Request::builder().method("POST").uri("/");
        for (k, v) in headers {
            request = request.header(k, v);
        }
        let mut request = request.body(()).unwrap();
        instructions.apply_to_request_http1x(&mut request);
        (request.into_parts().0, body.as_bytes())
    }

    #[test]
    fn without_keys_everything_passes() {
        let (parts, body) = signed("anything", SystemTime::now(), "{}");
        assert_eq!(authorize(&[], &parts, body), Ok(Some("AKIDSLUICE".into())));
        let unsigned = Request::builder().uri("/").body(()).unwrap().into_parts().0;
        assert_eq!(authorize(&[], &unsigned, b""), Ok(None));
    }

    #[test]
    fn a_correct_signature_passes_and_a_wrong_one_fails() {
        let (parts, body) = signed("wJalrXUtnFEMI/K7MDENG", SystemTime::now(), "{}");
        assert_eq!(authorize(&keys(), &parts, body), Ok(Some("AKIDSLUICE".into())));
        assert_eq!(authorize(&keys(), &parts, b"{\"tampered\":1}"), Err(AuthError::SignatureMismatch));
        let (parts, body) = signed("wrong-secret", SystemTime::now(), "{}");
        assert_eq!(authorize(&keys(), &parts, body), Err(AuthError::SignatureMismatch));
    }

    #[test]
    fn stale_unsigned_and_unknown_requests_fail() {
        let hour_ago = SystemTime::now() - Duration::from_secs(3600);
        let (parts, body) = signed("wJalrXUtnFEMI/K7MDENG", hour_ago, "{}");
        assert_eq!(authorize(&keys(), &parts, body), Err(AuthError::Expired));
        let unsigned = Request::builder().uri("/").body(()).unwrap().into_parts().0;
        assert_eq!(authorize(&keys(), &unsigned, b""), Err(AuthError::MissingSignature));
        let other = vec!["OTHER:secret".parse::<AccessKey>().unwrap()];
        let (parts, body) = signed("x", SystemTime::now(), "{}");
        assert_eq!(authorize(&other, &parts, body), Err(AuthError::UnknownAccessKey("AKIDSLUICE".into())));
    }

    #[test]
    fn secrets_never_print() {
        let key: AccessKey = "id:topsecret".parse().unwrap();
        assert!(!format!("{key:?}").contains("topsecret"));
        assert!("nocolon".parse::<AccessKey>().is_err());
    }

    #[test]
    fn parses_the_header() {
        let h = parse_authorization(
            "AWS4-HMAC-SHA256 Credential=AK/20261130/eu-west-1/sns/aws4_request, SignedHeaders=host;x-amz-date, Signature=abc",
        )
        .unwrap();
        assert_eq!((h.access_key_id, h.region, h.service, h.signature), ("AK", "eu-west-1", "sns", "abc"));
        assert_eq!(h.signed_headers, ["host", "x-amz-date"]);
        assert!(parse_authorization("Bearer x").is_err());
    }
}
