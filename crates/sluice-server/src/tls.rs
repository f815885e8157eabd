//! TLS on the server's one port, with rustls (the `ring` provider, no C toolchain): a
//! certificate chain and its private key from PEM files (`--tls-cert`, `--tls-key`), read again
//! by [`Tls::reload`] (on SIGHUP), so that a renewed certificate is served without a restart.
//! A reload that fails keeps the certificate being served and says why.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// Why a certificate or key could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read the TLS certificate {path}: {reason}")]
    Certificate { path: String, reason: String },
    #[error("cannot read the TLS private key {path}: {reason}")]
    Key { path: String, reason: String },
    #[error("the TLS certificate and key do not go together: {0}")]
    Mismatch(String),
}

/// The certificate being served, and where it was read from.
pub struct Tls {
    cert: PathBuf,
    key: PathBuf,
    config: RwLock<Arc<ServerConfig>>,
}

impl std::fmt::Debug for Tls {
    // The paths only: never the key.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tls").field("cert", &self.cert).field("key", &self.key).finish()
    }
}

/// Two servings are the same when they read the same files.
impl PartialEq for Tls {
    fn eq(&self, other: &Tls) -> bool {
        self.cert == other.cert && self.key == other.key
    }
}

impl Eq for Tls {}

impl Tls {
    /// Reads the certificate chain and key; the error names the file and what is wrong.
    pub fn load(cert: &Path, key: &Path) -> Result<Tls, TlsError> {
        let config = read(cert, key)?;
        Ok(Tls { cert: cert.to_path_buf(), key: key.to_path_buf(), config: RwLock::new(Arc::new(config)) })
    }

    /// Reads both files again and serves what they hold to every new connection; connections
    /// already open keep theirs. On an error the old certificate stays.
    pub fn reload(&self) -> Result<(), TlsError> {
        let config = read(&self.cert, &self.key)?;
        *self.config.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(config);
        Ok(())
    }

    /// An acceptor with the certificate served now.
    pub fn acceptor(&self) -> TlsAcceptor {
        TlsAcceptor::from(self.config.read().unwrap_or_else(|e| e.into_inner()).clone())
    }
}

fn read(cert_path: &Path, key_path: &Path) -> Result<ServerConfig, TlsError> {
    let cert_error = |reason: String| TlsError::Certificate { path: cert_path.display().to_string(), reason };
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert_path)
        .map_err(|e| cert_error(e.to_string()))?
        .collect::<Result<_, _>>()
        .map_err(|e| cert_error(e.to_string()))?;
    if certs.is_empty() {
        return Err(cert_error("no PEM certificate in it (-----BEGIN CERTIFICATE-----)".to_string()));
    }
    let key = PrivateKeyDer::from_pem_file(key_path)
        .map_err(|e| TlsError::Key { path: key_path.display().to_string(), reason: e.to_string() })?;
    let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Mismatch(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| TlsError::Mismatch(e.to_string()))?;
    // The server speaks HTTP/1.1 only.
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_that_are_not_a_certificate_and_key_are_named_in_the_error() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing.pem");
        let junk = dir.path().join("junk.pem");
        std::fs::write(&junk, "not pem at all\n").unwrap();
        match Tls::load(&missing, &junk) {
            Err(TlsError::Certificate { path, .. }) => assert!(path.ends_with("missing.pem")),
            other => panic!("expected a certificate error: {other:?}"),
        }
        match Tls::load(&junk, &junk) {
            Err(TlsError::Certificate { reason, .. }) => assert!(reason.contains("no PEM certificate"), "{reason}"),
            other => panic!("expected a certificate error: {other:?}"),
        }
    }
}
