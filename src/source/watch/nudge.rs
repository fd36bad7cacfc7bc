//! Nudges: a watch that has heard nothing for a while asks the API server for its resource
//! with a consistent read of at most one object. The read makes the server's watch cache ask
//! etcd for progress, so the cache learns etcd's newest revision and has a resourceVersion
//! newer than the watch's to bookmark at its next minute's try (`progress::Silence` says
//! why a quiet resource's watch otherwise hears nothing). One nudge per resource kind serves
//! every watch of it: the cache is per kind, whatever the namespace.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use kube::api::ListParams;

use super::{Endpoint, Listed, Watch};
use crate::index::Resource;
use crate::source::request::{self, Ask, PageBuffers};

/// The longest a nudge may take: it is a read of one object.
const NUDGE_TIMEOUT: Duration = Duration::from_secs(10);

/// When each resource kind was last nudged, shared by its watches.
#[derive(Debug, Default)]
pub(super) struct Nudges {
    last: Mutex<[Option<Instant>; Resource::ALL.len()]>,
}

impl Nudges {
    /// Whether `resource` is due a nudge at `now`: none in the last `every`. Taking it
    /// records it, so that watches of the same kind in other namespaces do not repeat it.
    pub(super) fn take(&self, resource: Resource, now: Instant, every: Duration) -> bool {
        let mut last = self.last.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let slot = &mut last[resource as usize];
        if slot.is_some_and(|at| now.duration_since(at) < every) {
            return false;
        }
        *slot = Some(now);
        true
    }
}

impl Watch {
    /// Nudge the server for `K` unless another watch of `K` just did. In the background: the
    /// watch goes on waiting, and whether its silence is a stall is still the silence's call.
    pub(super) fn nudge<K: Listed>(&self, endpoint: &Endpoint, every: Duration) {
        if !self.nudges.take(K::RESOURCE, Instant::now(), every) {
            return;
        }
        let client = self.client.clone();
        let url_path = endpoint.url_path.clone();
        // No resourceVersion: a consistent read, the kind that asks etcd for progress.
        let params =
            ListParams { label_selector: endpoint.list.label_selector.clone(), limit: Some(1), ..Default::default() };
        tokio::spawn(async move {
            let answer = request::list_page::<K>(
                &client,
                &url_path,
                &params,
                Ask::default(),
                NUDGE_TIMEOUT,
                &mut PageBuffers::default(),
            )
            .await;
            if let Err(error) = answer {
                tracing::debug!(resource = K::RESOURCE.as_str(), %error, "nudge for a bookmark failed");
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_nudge_per_kind_per_period_whatever_the_namespace() {
        let nudges = Nudges::default();
        let (start, every) = (Instant::now(), Duration::from_secs(20));
        assert!(nudges.take(Resource::DaemonSets, start, every));
        // Another namespace's DaemonSet watch, a moment later: already done.
        assert!(!nudges.take(Resource::DaemonSets, start + Duration::from_secs(5), every));
        // Another kind is its own.
        assert!(nudges.take(Resource::Pods, start + Duration::from_secs(5), every));
        assert!(nudges.take(Resource::DaemonSets, start + every, every));
    }
}
