//! One list of the four resources into a fresh index: a one-shot answer (the kubectl plugin)
//! needs no watch. Lists are paged, as the watcher's initial list is.

use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet};
use kube::api::ListParams;
use kube::{Api, Client};
use serde::de::DeserializeOwned;

use crate::index::{Index, Indexed};
use crate::k8s::convert::ConvertError;
use crate::k8s::slim::{SlimNode, SlimPod};
use crate::source::watch::DEFAULT_PAGE_SIZE;

#[derive(Debug, thiserror::Error)]
pub enum ListError {
    #[error("cannot list {resource}: {source}")]
    Api { resource: &'static str, source: kube::Error },
    #[error(transparent)]
    Invalid(#[from] ConvertError),
}

/// Fill `index` from one list of each resource: nodes cluster-wide, the rest in
/// `namespace` (or all), pods by `pod_selector`.
pub async fn list_into(
    index: &mut Index,
    client: &Client,
    namespace: Option<&str>,
    pod_selector: &str,
) -> Result<(), ListError> {
    let scoped = |client: &Client| match namespace {
        Some(ns) => (
            Api::namespaced(client.clone(), ns),
            Api::namespaced(client.clone(), ns),
            Api::namespaced(client.clone(), ns),
        ),
        None => (Api::all(client.clone()), Api::all(client.clone()), Api::all(client.clone())),
    };
    let (daemonsets, revisions, pods): (Api<DaemonSet>, Api<ControllerRevision>, Api<SlimPod>) = scoped(client);
    index.relist(all(&Api::<SlimNode>::all(client.clone()), "nodes", &ListParams::default()).await?)?;
    index.relist(all(&daemonsets, "daemonsets", &ListParams::default()).await?)?;
    index.relist(all(&revisions, "controllerrevisions", &ListParams::default()).await?)?;
    index.relist(all(&pods, "pods", &ListParams::default().labels(pod_selector)).await?)?;
    Ok(())
}

/// The nodes `selector` selects (all when empty), as the watch reads them.
pub async fn nodes(client: &Client, selector: &str) -> Result<Vec<SlimNode>, ListError> {
    all(&Api::<SlimNode>::all(client.clone()), "nodes", &ListParams::default().labels(selector)).await
}

/// The node `name`; `None` when there is none.
pub async fn node(client: &Client, name: &str) -> Result<Option<SlimNode>, ListError> {
    Api::<SlimNode>::all(client.clone())
        .get_opt(name)
        .await
        .map_err(|source| ListError::Api { resource: "nodes", source })
}

async fn all<K>(api: &Api<K>, resource: &'static str, params: &ListParams) -> Result<Vec<K>, ListError>
where
    K: Indexed + Clone + DeserializeOwned + std::fmt::Debug,
{
    let mut params = params.clone().limit(DEFAULT_PAGE_SIZE);
    let mut items = Vec::new();
    loop {
        let page = api.list(&params).await.map_err(|source| ListError::Api { resource, source })?;
        items.extend(page.items);
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => return Ok(items),
        }
    }
}
