//! API key tokens: `slk_<id>_<secret>`, where the id (16 hex digits) finds the key's record and
//! the secret (32 random bytes, base64url) proves the holder. Only an Argon2id hash of the whole
//! token is stored; the token is shown once, when the key is made.

use argon2::Argon2;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use rand::RngCore;
use sha2::{Digest, Sha256};

/// How every Sluice API key starts, so that a leaked one is easy to recognise (and scan for).
pub const TOKEN_PREFIX: &str = "slk_";
/// Bytes of randomness in a key's id (shown as hex).
const ID_BYTES: usize = 8;
/// Bytes of randomness in a key's secret.
const SECRET_BYTES: usize = 32;
/// Longest text taken as a token before it is even parsed.
pub const TOKEN_LEN_MAX: usize = 128;

/// A fresh key: its id and the whole token to hand out.
pub fn generate() -> (String, String) {
    let mut id = [0u8; ID_BYTES];
    let mut secret = [0u8; SECRET_BYTES];
    rand::rngs::OsRng.fill_bytes(&mut id);
    rand::rngs::OsRng.fill_bytes(&mut secret);
    let id = hex(&id);
    let token = format!("{TOKEN_PREFIX}{id}_{}", URL_SAFE_NO_PAD.encode(secret));
    (id, token)
}

/// The key id a token names, if it has a token's shape.
pub fn key_id(token: &str) -> Option<&str> {
    if token.len() > TOKEN_LEN_MAX {
        return None;
    }
    let rest = token.strip_prefix(TOKEN_PREFIX)?;
    let id = rest.get(..ID_BYTES * 2)?;
    let secret = rest.get(ID_BYTES * 2..)?.strip_prefix('_')?;
    let id_ok = id.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    let secret_ok = !secret.is_empty() && secret.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    (id_ok && secret_ok).then_some(id)
}

/// The Argon2id hash (PHC string) stored for a token; a fresh random salt each time.
pub fn hash(token: &str) -> String {
    let mut salt = [0u8; 16];
    rand::rngs::OsRng.fill_bytes(&mut salt);
    let salt = SaltString::encode_b64(&salt).expect("16 bytes is a valid salt length");
    Argon2::default()
        .hash_password(token.as_bytes(), &salt)
        .expect("Argon2 takes any token with the default parameters")
        .to_string()
}

/// Whether `token` is the one `stored` was hashed from (Argon2 compares in constant time). A
/// stored hash that does not parse verifies nothing.
pub fn verify(token: &str, stored: &str) -> bool {
    PasswordHash::new(stored).is_ok_and(|parsed| Argon2::default().verify_password(token.as_bytes(), &parsed).is_ok())
}

/// How a key's AWS access key id starts; the rest is the key's id in upper case.
pub const AWS_KEY_PREFIX: &str = "SLK";
/// Bytes of randomness in an AWS secret (40 characters of base64, as AWS's own).
const AWS_SECRET_BYTES: usize = 30;

/// A key's AWS access key id.
pub fn aws_access_key_id(id: &str) -> String {
    format!("{AWS_KEY_PREFIX}{}", id.to_ascii_uppercase())
}

/// The key id an AWS access key id names, if it has the shape of one of ours.
pub fn key_id_of_aws(access_key_id: &str) -> Option<String> {
    let hex = access_key_id.strip_prefix(AWS_KEY_PREFIX)?;
    let ok = hex.len() == ID_BYTES * 2 && hex.bytes().all(|b| b.is_ascii_digit() || (b'A'..=b'F').contains(&b));
    ok.then(|| hex.to_ascii_lowercase())
}

/// A fresh AWS secret access key.
pub fn aws_secret() -> String {
    let mut secret = [0u8; AWS_SECRET_BYTES];
    rand::rngs::OsRng.fill_bytes(&mut secret);
    base64::engine::general_purpose::STANDARD.encode(secret)
}

/// The SHA-256 of a token, the key of the in-memory cache of tokens already verified (never
/// stored, never logged).
pub fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_names_its_key_and_verifies_only_against_its_own_hash() {
        let (id, token) = generate();
        assert_eq!(key_id(&token), Some(id.as_str()));
        assert!(token.starts_with("slk_") && token.len() == 4 + 16 + 1 + 43, "{token}");
        let stored = hash(&token);
        assert!(stored.starts_with("$argon2id$"), "{stored}");
        assert!(verify(&token, &stored));
        let (_, other) = generate();
        assert!(!verify(&other, &stored));
        assert!(!verify(&token, "not a hash"));
        // Two hashes of one token differ (salted) and both verify it.
        assert_ne!(hash(&token), stored);
    }

    #[test]
    fn an_aws_access_key_id_names_its_key() {
        let (id, _) = generate();
        let aws = aws_access_key_id(&id);
        assert_eq!(aws.len(), 19);
        assert_eq!(key_id_of_aws(&aws), Some(id.clone()));
        assert_eq!(key_id_of_aws(&aws.to_lowercase()), None);
        assert_eq!(key_id_of_aws("AKIDSLUICE"), None);
        assert_eq!(aws_secret().len(), 40);
    }

    #[test]
    fn only_the_token_shape_is_taken() {
        for bad in [
            "",
            "slk_",
            "sk_0123456789abcdef_abc",
            "slk_0123456789abcdeX_abc",
            "slk_0123456789abcdef",
            "slk_0123456789abcdef_",
            "slk_0123456789abcdef-abc",
            "slk_0123456789abcdef_a b",
        ] {
            assert_eq!(key_id(bad), None, "{bad:?}");
        }
        assert_eq!(key_id(&format!("slk_0123456789abcdef_{}", "a".repeat(200))), None);
        assert_eq!(key_id("slk_0123456789abcdef_abc"), Some("0123456789abcdef"));
    }
}
