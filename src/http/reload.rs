//! Small credential files (certificates, keys, tokens) that are re-read when they change,
//! and the task that re-reads them.
//!
//! Polling the contents, rather than watching inodes, also catches Kubernetes' Secret
//! volume updates, which swap a symlink instead of writing the file.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::telemetry::{CredentialFile, Telemetry};

/// Credential files are small; anything larger is a mistake, not a credential.
const MAX_FILE_BYTES: u64 = 1024 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum FileError {
    #[error("cannot read {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{path} is larger than {MAX_FILE_BYTES} bytes")]
    TooLarge { path: PathBuf },
}

#[derive(Debug)]
pub struct WatchedFiles<const N: usize> {
    paths: [PathBuf; N],
    last: Option<[Vec<u8>; N]>,
}

impl<const N: usize> WatchedFiles<N> {
    pub fn new(paths: [PathBuf; N]) -> Self {
        Self { paths, last: None }
    }

    /// The current contents of every file.
    pub fn read(&mut self) -> Result<[Vec<u8>; N], FileError> {
        let contents = self.read_all()?;
        self.last = Some(contents.clone());
        Ok(contents)
    }

    /// The contents, if any file differs from the last read.
    pub fn read_if_changed(&mut self) -> Result<Option<[Vec<u8>; N]>, FileError> {
        let contents = self.read_all()?;
        if self.last.as_ref() == Some(&contents) {
            return Ok(None);
        }
        self.last = Some(contents.clone());
        Ok(Some(contents))
    }

    fn read_all(&self) -> Result<[Vec<u8>; N], FileError> {
        let mut out: [Vec<u8>; N] = std::array::from_fn(|_| Vec::new());
        for (slot, path) in out.iter_mut().zip(&self.paths) {
            let read_error = |source| FileError::Read { path: path.clone(), source };
            let len = std::fs::metadata(path).map_err(read_error)?.len();
            if len > MAX_FILE_BYTES {
                return Err(FileError::TooLarge { path: path.clone() });
            }
            *slot = std::fs::read(path).map_err(read_error)?;
        }
        Ok(out)
    }
}

/// Credentials that re-read their files (the TLS certificate, the auth secrets).
pub trait Reload: Send + Sync {
    /// Which files, for the log and the self-metrics.
    fn file(&self) -> CredentialFile;
    /// `Ok(true)` when new credentials are in use; on error the previous ones stay.
    fn reload_if_changed(&self) -> Result<bool, String>;
}

/// Re-read every credential every `every`, so rotated Secrets take effect without a
/// restart. A bad rotation is logged and counted; the old credentials stay.
pub async fn reload_credentials(credentials: Vec<Arc<dyn Reload>>, telemetry: Arc<Telemetry>, every: Duration) {
    let mut ticks = tokio::time::interval(every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticks.tick().await;
    loop {
        ticks.tick().await;
        for credential in &credentials {
            let file = credential.file();
            match credential.reload_if_changed() {
                Ok(false) => {}
                Ok(true) => {
                    tracing::info!(file = file.as_str(), "reloaded");
                    telemetry.record_reload(file, true);
                }
                Err(error) => {
                    tracing::error!(file = file.as_str(), %error, "cannot reload; the previous credentials stay in use");
                    telemetry.record_reload(file, false);
                }
            }
        }
    }
}
