//! Small credential files (certificates, keys, tokens) that are re-read when they change.
//!
//! Polling the contents, rather than watching inodes, also catches Kubernetes' Secret
//! volume updates, which swap a symlink instead of writing the file.

use std::path::PathBuf;

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
