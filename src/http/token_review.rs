//! `--auth-kubernetes`: a bearer token on `/metrics` is accepted only if the API server
//! authenticates it (TokenReview) and authorizes that user for `get` on the non-resource
//! URL `/metrics` (SubjectAccessReview), as kube-rbac-proxy and kube-state-metrics'
//! `--auth-filter` do. kube-prometheus-stack's Prometheus presents its ServiceAccount token,
//! and its ClusterRole already allows `get` on `/metrics`.
//!
//! Answers are cached briefly, keyed by the token's SHA-256. A review that fails (API server
//! down, RBAC missing, timeout) refuses the scrape and is not cached: it never opens the door.

use parking_lot::Mutex;
use std::collections::HashMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec};
use kube::Api;
use kube::api::PostParams;

/// How long the API server's answer stands. Revoking a token or a binding takes effect
/// within this long; Prometheus scrapes every 30 s, so one review per minute per scraper.
const ALLOWED_FOR: Duration = Duration::from_secs(60);
/// Short, so that a fix to RBAC shows at the next scrape or the one after.
const REFUSED_FOR: Duration = Duration::from_secs(10);
/// Both reviews together; Prometheus' scrape timeout is 10 s.
const REVIEW_TIMEOUT: Duration = Duration::from_secs(5);
/// Distinct tokens remembered; more are reviewed every time until entries expire.
const MAX_CACHED: usize = 1024;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    Allowed,
    /// Not a token the API server accepts, or it could not be checked: 401.
    Unauthenticated,
    /// A valid token whose user may not `get /metrics`: 403.
    Forbidden,
}

#[derive(Debug, thiserror::Error)]
enum ReviewError {
    #[error("TokenReview failed: {0}")]
    TokenReview(#[source] kube::Error),
    #[error("SubjectAccessReview failed: {0}")]
    SubjectAccessReview(#[source] kube::Error),
    #[error("no answer within {REVIEW_TIMEOUT:?}")]
    Timeout,
}

pub struct TokenReviewer {
    client: kube::Client,
    cache: Mutex<HashMap<[u8; 32], (Decision, Instant)>>,
}

impl std::fmt::Debug for TokenReviewer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenReviewer").finish_non_exhaustive()
    }
}

impl TokenReviewer {
    pub fn new(client: kube::Client) -> Self {
        Self { client, cache: Mutex::new(HashMap::new()) }
    }

    pub async fn review(&self, token: &[u8]) -> Decision {
        // A token is base64url and dots; anything else is no token the API server issued.
        let Ok(token) = std::str::from_utf8(token) else { return Decision::Unauthenticated };
        let key: [u8; 32] = ring::digest::digest(&ring::digest::SHA256, token.as_bytes())
            .as_ref()
            .try_into()
            .expect("SHA-256 is 32 bytes");
        let now = Instant::now();
        if let Some(decision) = self.cached(&key, now) {
            return decision;
        }
        let asked = tokio::time::timeout(REVIEW_TIMEOUT, self.ask(token)).await.unwrap_or(Err(ReviewError::Timeout));
        match asked {
            Ok(decision) => {
                self.remember(key, decision, now);
                decision
            }
            Err(error) => {
                tracing::warn!(%error, "cannot review a scrape's token; refusing the scrape");
                Decision::Unauthenticated
            }
        }
    }

    async fn ask(&self, token: &str) -> Result<Decision, ReviewError> {
        let post = PostParams::default();
        let review = TokenReview {
            spec: TokenReviewSpec { token: Some(token.to_owned()), ..Default::default() },
            ..Default::default()
        };
        let status = Api::<TokenReview>::all(self.client.clone())
            .create(&post, &review)
            .await
            .map_err(ReviewError::TokenReview)?
            .status;
        let Some(user) = status.filter(|s| s.authenticated == Some(true)).and_then(|s| s.user) else {
            return Ok(Decision::Unauthenticated);
        };
        let access = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: user.username,
                groups: user.groups,
                uid: user.uid,
                extra: user.extra,
                non_resource_attributes: Some(NonResourceAttributes {
                    path: Some("/metrics".into()),
                    verb: Some("get".into()),
                }),
                ..Default::default()
            },
            ..Default::default()
        };
        let allowed = Api::<SubjectAccessReview>::all(self.client.clone())
            .create(&post, &access)
            .await
            .map_err(ReviewError::SubjectAccessReview)?
            .status
            .is_some_and(|s| s.allowed);
        Ok(if allowed { Decision::Allowed } else { Decision::Forbidden })
    }

    fn cached(&self, key: &[u8; 32], now: Instant) -> Option<Decision> {
        let cache = self.cache.lock();
        cache.get(key).filter(|(_, until)| now < *until).map(|(decision, _)| *decision)
    }

    fn remember(&self, key: [u8; 32], decision: Decision, now: Instant) {
        let ttl = if decision == Decision::Allowed { ALLOWED_FOR } else { REFUSED_FOR };
        let mut cache = self.cache.lock();
        if cache.len() >= MAX_CACHED {
            cache.retain(|_, (_, until)| now < *until);
        }
        if cache.len() < MAX_CACHED {
            cache.insert(key, (decision, now + ttl));
        }
    }
}
