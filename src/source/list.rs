//! One list of the four resources (and the `FailedCreate` Events) into a fresh index: a one-shot answer (`explain`, the
//! kubectl plugin) needs no watch. Lists are paged, as the watcher's initial list is, and
//! a refusal is one line that says what to grant.

use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::ListParams;
use kube::{Api, Client};
use serde::de::DeserializeOwned;

use crate::index::{Index, Indexed};
use crate::k8s::convert::ConvertError;
use crate::k8s::slim::{SlimNode, SlimPod};
use crate::source::advice;
use crate::source::watch::DEFAULT_PAGE_SIZE;

#[derive(Debug, thiserror::Error)]
pub enum ListError {
    /// The API server's own message names the resource and the user.
    #[error("{}", advice::kube_error_line(.error))]
    Refused { resource: &'static str, error: kube::Error },
    #[error("cannot list {resource}: {}", advice::kube_error_line(.error))]
    Api { resource: &'static str, error: kube::Error },
    #[error(transparent)]
    Invalid(#[from] ConvertError),
    #[error("namespaces {0:?} not found")]
    NoNamespace(String),
}

impl ListError {
    fn of(resource: &'static str, error: kube::Error) -> Self {
        match &error {
            kube::Error::Api(status) if !status.message.is_empty() => Self::Refused { resource, error },
            _ => Self::Api { resource, error },
        }
    }
}

/// Fill `index` from one list of each resource: nodes cluster-wide, the rest in each of
/// `namespaces` (all when empty), pods by `pod_selector`. A namespace that does not exist
/// is an error, not an empty answer.
pub async fn list_into(
    index: &mut Index,
    client: &Client,
    namespaces: &[String],
    pod_selector: &str,
) -> Result<(), ListError> {
    for namespace in namespaces {
        check_namespace(client, namespace).await?;
    }
    let pods = ListParams::default().labels(pod_selector);
    index.relist(all(&Api::<SlimNode>::all(client.clone()), "nodes", &ListParams::default()).await?)?;
    index.relist(in_each::<DaemonSet>(client, namespaces, "daemonsets", &ListParams::default()).await?)?;
    index.relist(
        in_each::<ControllerRevision>(client, namespaces, "controllerrevisions", &ListParams::default()).await?,
    )?;
    index.relist(in_each::<SlimPod>(client, namespaces, "pods", &pods).await?)?;
    crate::source::failed_creates::list_into(index, client, namespaces).await;
    Ok(())
}

/// A namespace that is not there is an error; one this client may not read is given the
/// benefit of the doubt (the lists that follow say what they find).
pub async fn check_namespace(client: &Client, name: &str) -> Result<(), ListError> {
    match Api::<Namespace>::all(client.clone()).get_opt(name).await {
        Ok(None) => Err(ListError::NoNamespace(name.to_owned())),
        Ok(Some(_)) | Err(_) => Ok(()),
    }
}

/// How many daemon pods the DaemonSets outside `namespace` count as misscheduled (their
/// status), so an empty answer can say where the others are; `None` when they cannot be read.
pub async fn misscheduled_elsewhere(client: &Client, namespace: &str) -> Option<usize> {
    let daemonsets = all(&Api::<DaemonSet>::all(client.clone()), "daemonsets", &ListParams::default()).await.ok()?;
    let count = daemonsets
        .iter()
        .filter(|ds| ds.metadata.namespace.as_deref() != Some(namespace))
        .filter_map(|ds| ds.status.as_ref())
        .map(|status| usize::try_from(status.number_misscheduled).unwrap_or(0))
        .sum();
    Some(count)
}

async fn in_each<K>(
    client: &Client,
    namespaces: &[String],
    resource: &'static str,
    params: &ListParams,
) -> Result<Vec<K>, ListError>
where
    K: Indexed + kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
    K: Clone + DeserializeOwned + std::fmt::Debug,
{
    if namespaces.is_empty() {
        return all(&Api::<K>::all(client.clone()), resource, params).await;
    }
    let mut items = Vec::new();
    for namespace in namespaces {
        items.extend(all(&Api::<K>::namespaced(client.clone(), namespace), resource, params).await?);
    }
    Ok(items)
}

/// The nodes `selector` selects (all when empty), as the watch reads them.
pub async fn nodes(client: &Client, selector: &str) -> Result<Vec<SlimNode>, ListError> {
    all(&Api::<SlimNode>::all(client.clone()), "nodes", &ListParams::default().labels(selector)).await
}

/// The node `name`; `None` when there is none.
pub async fn node(client: &Client, name: &str) -> Result<Option<SlimNode>, ListError> {
    Api::<SlimNode>::all(client.clone()).get_opt(name).await.map_err(|source| ListError::of("nodes", source))
}

async fn all<K>(api: &Api<K>, resource: &'static str, params: &ListParams) -> Result<Vec<K>, ListError>
where
    K: Indexed + Clone + DeserializeOwned + std::fmt::Debug,
{
    let mut params = params.clone().limit(DEFAULT_PAGE_SIZE);
    let mut items = Vec::new();
    loop {
        let page = api.list(&params).await.map_err(|source| ListError::of(resource, source))?;
        items.extend(page.items);
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => return Ok(items),
        }
    }
}
