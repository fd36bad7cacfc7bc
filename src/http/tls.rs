//! Optional TLS for the HTTP edge. The certificate is re-read when its files change, so
//! cert-manager or a rotated Secret takes effect without a restart.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use tokio_rustls::TlsAcceptor;

use crate::http::reload::{FileError, Reload, WatchedFiles};
use crate::telemetry::CredentialFile;

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error(transparent)]
    Read(#[from] FileError),
    #[error("{path}: no PEM certificate found")]
    NoCertificate { path: PathBuf },
    #[error("{path}: {message}")]
    Pem { path: PathBuf, message: String },
    #[error("{cert} and {key} are not a usable key pair: {source}")]
    KeyPair { cert: PathBuf, key: PathBuf, source: rustls::Error },
    #[error("cannot configure TLS: {0}")]
    Config(rustls::Error),
}

/// The serving certificate, swapped in place on reload. New handshakes use the new
/// certificate; established connections keep theirs.
#[derive(Debug)]
pub struct ReloadingCert {
    /// Which certificate, for the log and the self-metrics.
    file: CredentialFile,
    cert_path: PathBuf,
    key_path: PathBuf,
    files: Mutex<WatchedFiles<2>>,
    current: RwLock<Arc<CertifiedKey>>,
    provider: Arc<CryptoProvider>,
}

impl ReloadingCert {
    pub fn load(file: CredentialFile, cert_path: &Path, key_path: &Path) -> Result<Arc<Self>, TlsError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut files = WatchedFiles::new([cert_path.to_owned(), key_path.to_owned()]);
        let [cert_pem, key_pem] = files.read()?;
        let current = certified_key(cert_path, &cert_pem, key_path, &key_pem, &provider)?;
        Ok(Arc::new(Self {
            file,
            cert_path: cert_path.to_owned(),
            key_path: key_path.to_owned(),
            files: Mutex::new(files),
            current: RwLock::new(Arc::new(current)),
            provider,
        }))
    }

    /// Re-read both files. `Ok(true)`: a new certificate is in use; `Ok(false)`: the files
    /// are unchanged. On error the previous certificate stays in use.
    pub fn reload_if_changed(&self) -> Result<bool, TlsError> {
        let mut files = self.files.lock();
        let Some([cert_pem, key_pem]) = files.read_if_changed()? else { return Ok(false) };
        let next = certified_key(&self.cert_path, &cert_pem, &self.key_path, &key_pem, &self.provider)?;
        *self.current.write() = Arc::new(next);
        Ok(true)
    }

    pub fn acceptor(self: &Arc<Self>) -> Result<TlsAcceptor, TlsError> {
        let mut config = rustls::ServerConfig::builder_with_provider(self.provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(TlsError::Config)?
            .with_no_client_auth()
            .with_cert_resolver(self.clone());
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(TlsAcceptor::from(Arc::new(config)))
    }
}

impl Reload for ReloadingCert {
    fn file(&self) -> CredentialFile {
        self.file
    }
    fn reload_if_changed(&self) -> Result<bool, String> {
        ReloadingCert::reload_if_changed(self).map_err(|e| e.to_string())
    }
}

impl ResolvesServerCert for ReloadingCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current.read().clone())
    }
}

fn certified_key(
    cert_path: &Path,
    cert_pem: &[u8],
    key_path: &Path,
    key_pem: &[u8],
    provider: &CryptoProvider,
) -> Result<CertifiedKey, TlsError> {
    let pem_error =
        |path: &Path, e: rustls::pki_types::pem::Error| TlsError::Pem { path: path.to_owned(), message: e.to_string() };
    let chain =
        CertificateDer::pem_slice_iter(cert_pem).collect::<Result<Vec<_>, _>>().map_err(|e| pem_error(cert_path, e))?;
    if chain.is_empty() {
        return Err(TlsError::NoCertificate { path: cert_path.to_owned() });
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(|e| pem_error(key_path, e))?;
    // Also checks that the key belongs to the certificate, so a half-rotated pair is refused.
    CertifiedKey::from_der(chain, key, provider).map_err(|source| TlsError::KeyPair {
        cert: cert_path.to_owned(),
        key: key_path.to_owned(),
        source,
    })
}
