//! Optional bearer-token or basic authentication for `/metrics`, with the secrets read
//! from files (re-read when they change) so they never appear in argv or the environment.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use base64::Engine;
use parking_lot::{Mutex, RwLock};
use subtle::ConstantTimeEq;

use crate::http::reload::{FileError, Reload, WatchedFiles};
use crate::http::token_review::{Decision, TokenReviewer};
use crate::telemetry::CredentialFile;

#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    #[error(transparent)]
    Read(#[from] FileError),
    #[error("{path} is empty")]
    Empty { path: PathBuf },
}

/// What a request may present; either is enough when both are configured.
#[derive(Debug, Default, PartialEq, Eq)]
struct Secrets {
    bearer_token: Option<Vec<u8>>,
    /// `user:password`, as basic authentication encodes it.
    basic_credentials: Option<Vec<u8>>,
}

#[derive(Debug)]
pub struct Authenticator {
    bearer_file: Option<PathBuf>,
    basic: Option<(String, PathBuf)>,
    files: Mutex<WatchedFiles<2>>,
    secrets: RwLock<Secrets>,
}

impl Authenticator {
    /// `None` when neither method is configured.
    pub fn load(bearer_file: Option<&Path>, basic: Option<(&str, &Path)>) -> Result<Option<Self>, AuthError> {
        if bearer_file.is_none() && basic.is_none() {
            return Ok(None);
        }
        // An unused slot watches /dev/null, which never changes.
        let null = PathBuf::from("/dev/null");
        let mut files = WatchedFiles::new([
            bearer_file.map_or_else(|| null.clone(), Path::to_owned),
            basic.map_or(null, |(_, path)| path.to_owned()),
        ]);
        let bearer_file = bearer_file.map(Path::to_owned);
        let basic = basic.map(|(user, path)| (user.to_owned(), path.to_owned()));
        let secrets = secrets_from(bearer_file.as_deref(), basic.as_ref(), files.read()?)?;
        Ok(Some(Self { bearer_file, basic, files: Mutex::new(files), secrets: RwLock::new(secrets) }))
    }

    /// Re-read the secret files; `Ok(true)` when new secrets are in use. On error the
    /// previous secrets stay in use.
    pub fn reload_if_changed(&self) -> Result<bool, AuthError> {
        let mut files = self.files.lock();
        let Some(contents) = files.read_if_changed()? else { return Ok(false) };
        let next = secrets_from(self.bearer_file.as_deref(), self.basic.as_ref(), contents)?;
        *self.secrets.write() = next;
        Ok(true)
    }

    pub const BEARER_CHALLENGE: &'static str = "Bearer realm=\"misschedule-exporter\"";

    /// `WWW-Authenticate` values for a refused request: one per configured method.
    pub fn challenges(&self) -> impl Iterator<Item = &'static str> {
        let bearer = self.bearer_file.as_ref().map(|_| Self::BEARER_CHALLENGE);
        let basic = self.basic.as_ref().map(|_| "Basic realm=\"misschedule-exporter\", charset=\"UTF-8\"");
        bearer.into_iter().chain(basic)
    }

    /// Whether an `Authorization` header value grants access.
    pub fn allows(&self, authorization: Option<&[u8]>) -> bool {
        let Some(value) = authorization else { return false };
        let Some((scheme, credentials)) = split_scheme(value) else { return false };
        let secrets = self.secrets.read();
        if scheme.eq_ignore_ascii_case(b"bearer") {
            return secrets.bearer_token.as_deref().is_some_and(|token| bool::from(token.ct_eq(credentials)));
        }
        if scheme.eq_ignore_ascii_case(b"basic") {
            let Some(expected) = secrets.basic_credentials.as_deref() else { return false };
            let Ok(decoded) = base64::engine::general_purpose::STANDARD.decode(credentials) else { return false };
            return bool::from(expected.ct_eq(&decoded));
        }
        false
    }
}

impl Reload for Authenticator {
    fn file(&self) -> CredentialFile {
        CredentialFile::Auth
    }
    fn reload_if_changed(&self) -> Result<bool, String> {
        Authenticator::reload_if_changed(self).map_err(|e| e.to_string())
    }
}

/// Who may read `/metrics`: holders of the configured credentials, and (with
/// `token_review`) bearers of a token the API server authenticates and authorizes.
/// Either is enough; with neither configured, anyone may.
#[derive(Clone, Debug, Default)]
pub struct ScrapeAuth {
    pub credentials: Option<Arc<Authenticator>>,
    pub token_review: Option<Arc<TokenReviewer>>,
}

impl ScrapeAuth {
    pub fn is_required(&self) -> bool {
        self.credentials.is_some() || self.token_review.is_some()
    }
}

/// The middleware that lets a request through, or answers 401 with a challenge per method
/// (or 403 when the API server authenticated the token but does not authorize it).
pub(crate) async fn require_auth(State(auth): State<ScrapeAuth>, request: Request, next: Next) -> Response {
    let presented = request.headers().get(header::AUTHORIZATION).map(HeaderValue::as_bytes);
    if auth.credentials.as_ref().is_some_and(|c| c.allows(presented)) {
        return next.run(request).await;
    }
    let bearer = presented
        .and_then(split_scheme)
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case(b"bearer"))
        .map(|(_, token)| token);
    if let (Some(reviewer), Some(token)) = (&auth.token_review, bearer) {
        match reviewer.review(token).await {
            Decision::Allowed => return next.run(request).await,
            Decision::Forbidden => return (StatusCode::FORBIDDEN, "forbidden\n").into_response(),
            Decision::Unauthenticated => {}
        }
    }
    let mut response = (StatusCode::UNAUTHORIZED, "unauthorized\n").into_response();
    let static_challenges = auth.credentials.iter().flat_map(|c| c.challenges());
    let review_challenge = auth.token_review.as_ref().map(|_| Authenticator::BEARER_CHALLENGE);
    let mut challenges: Vec<&'static str> = static_challenges.chain(review_challenge).collect();
    challenges.dedup();
    for challenge in challenges {
        response.headers_mut().append(header::WWW_AUTHENTICATE, HeaderValue::from_static(challenge));
    }
    response
}

fn secrets_from(
    bearer_file: Option<&Path>,
    basic: Option<&(String, PathBuf)>,
    [token, password]: [Vec<u8>; 2],
) -> Result<Secrets, AuthError> {
    let mut secrets = Secrets::default();
    if let Some(path) = bearer_file {
        secrets.bearer_token = Some(non_empty(trim_line_end(token), path)?);
    }
    if let Some((user, path)) = basic {
        let password = non_empty(trim_line_end(password), path)?;
        let mut credentials = Vec::with_capacity(user.len() + 1 + password.len());
        credentials.extend_from_slice(user.as_bytes());
        credentials.push(b':');
        credentials.extend_from_slice(&password);
        secrets.basic_credentials = Some(credentials);
    }
    Ok(secrets)
}

/// `Scheme credentials`, split at the first run of spaces.
pub fn split_scheme(value: &[u8]) -> Option<(&[u8], &[u8])> {
    let space = value.iter().position(|&b| b == b' ')?;
    let credentials = value[space..].trim_ascii_start();
    (!credentials.is_empty()).then_some((&value[..space], credentials))
}

/// Secret files written by `echo` or editors end with a newline that is not part of the secret.
fn trim_line_end(mut bytes: Vec<u8>) -> Vec<u8> {
    while bytes.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
        bytes.pop();
    }
    bytes
}

fn non_empty(bytes: Vec<u8>, path: &Path) -> Result<Vec<u8>, AuthError> {
    if bytes.is_empty() { Err(AuthError::Empty { path: path.to_owned() }) } else { Ok(bytes) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_files(token: Option<&str>, basic: Option<(&str, &str)>) -> (tempdir::Dir, Authenticator) {
        let dir = tempdir::Dir::new();
        let token_path = token.map(|t| dir.write("token", t));
        let basic_path = basic.map(|(user, password)| (user, dir.write("password", password)));
        let auth = Authenticator::load(token_path.as_deref(), basic_path.as_ref().map(|(u, p)| (*u, p.as_path())))
            .expect("valid files")
            .expect("configured");
        (dir, auth)
    }

    mod tempdir {
        use std::path::PathBuf;

        pub struct Dir(pub PathBuf);

        impl Dir {
            pub fn new() -> Self {
                use std::sync::atomic::{AtomicUsize, Ordering};
                static NEXT: AtomicUsize = AtomicUsize::new(0);
                let n = NEXT.fetch_add(1, Ordering::Relaxed);
                let path = std::env::temp_dir().join(format!("misschedule-auth-{}-{n}", std::process::id()));
                std::fs::create_dir_all(&path).expect("temp dir");
                Self(path)
            }

            pub fn write(&self, name: &str, contents: &str) -> PathBuf {
                let path = self.0.join(name);
                std::fs::write(&path, contents).expect("write temp file");
                path
            }
        }

        impl Drop for Dir {
            fn drop(&mut self) {
                let _ = std::fs::remove_dir_all(&self.0);
            }
        }
    }

    fn basic(user_password: &str) -> Vec<u8> {
        format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(user_password)).into_bytes()
    }

    #[test]
    fn bearer_token_must_match_exactly() {
        let (_dir, auth) = with_files(Some("s3cret\n"), None);
        assert!(auth.allows(Some(b"Bearer s3cret")));
        assert!(auth.allows(Some(b"bearer s3cret")), "the scheme is case-insensitive");
        assert!(!auth.allows(Some(b"Bearer s3cre")));
        assert!(!auth.allows(Some(b"Bearer s3cret\n")));
        assert!(!auth.allows(Some(b"Bearer ")));
        assert!(!auth.allows(Some(b"s3cret")));
        assert!(!auth.allows(None));
        assert!(!auth.allows(Some(&basic("x:s3cret"))), "basic is not configured");
    }

    #[test]
    fn basic_credentials_must_match_user_and_password() {
        let (_dir, auth) = with_files(None, Some(("prometheus", "pa:ss\n")));
        assert!(auth.allows(Some(&basic("prometheus:pa:ss"))), "a colon may be part of the password");
        assert!(!auth.allows(Some(&basic("prometheus:pa"))));
        assert!(!auth.allows(Some(&basic("grafana:pa:ss"))));
        assert!(!auth.allows(Some(b"Basic not-base64!")));
        assert!(!auth.allows(Some(b"Bearer pa:ss")), "bearer is not configured");
    }

    #[test]
    fn either_method_is_enough_when_both_are_configured() {
        let (_dir, auth) = with_files(Some("token"), Some(("u", "p")));
        assert!(auth.allows(Some(b"Bearer token")));
        assert!(auth.allows(Some(&basic("u:p"))));
    }

    #[test]
    fn rotated_secrets_replace_the_old_ones_and_bad_rotations_keep_them() {
        let dir = tempdir::Dir::new();
        let path = dir.write("token", "old");
        let auth = Authenticator::load(Some(&path), None).expect("valid").expect("configured");
        assert!(!auth.reload_if_changed().expect("readable"), "unchanged files are not a reload");
        dir.write("token", "new\n");
        assert!(auth.reload_if_changed().expect("readable"));
        assert!(auth.allows(Some(b"Bearer new")));
        assert!(!auth.allows(Some(b"Bearer old")));
        dir.write("token", "");
        assert!(matches!(auth.reload_if_changed(), Err(AuthError::Empty { .. })));
        assert!(auth.allows(Some(b"Bearer new")), "an empty rotation keeps the previous token");
    }

    #[test]
    fn empty_or_missing_files_are_configuration_errors() {
        let dir = tempdir::Dir::new();
        let empty = dir.write("empty", "\n");
        assert!(matches!(Authenticator::load(Some(&empty), None), Err(AuthError::Empty { .. })));
        let missing = dir.0.join("missing");
        let error = Authenticator::load(None, Some(("u", &missing))).expect_err("missing file");
        assert!(error.to_string().contains("missing"), "{error}");
    }
}
