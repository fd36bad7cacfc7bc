//! A stand-in kubelet (and scheduler) for the test control plane, which has neither: it
//! binds new daemon pods to the node their matchFields term names, and finishes a pod's
//! delete `finish_after` after the controller asked for it, as a kubelet does once the
//! containers stopped. Without it a deleted pod stays Terminating forever and the lab shows
//! a cluster no user has: a node whose agent was removed never loses it.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::{Api, Client};
use serde_json::{Value, json};
use tokio::task::AbortHandle;

/// How often the stand-in looks at the pods.
const LOOK_EVERY: Duration = Duration::from_millis(200);

pub struct Kubelet {
    task: AbortHandle,
    bound: Arc<AtomicUsize>,
    finished: Arc<AtomicUsize>,
}

impl Kubelet {
    /// Run against every namespace until dropped.
    pub fn start(client: Client, finish_after: Duration) -> Self {
        let (bound, finished) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let task = tokio::spawn({
            let (bound, finished) = (bound.clone(), finished.clone());
            async move {
                let pods: Api<Pod> = Api::all(client.clone());
                // When each terminating pod (namespace/name/uid) was first seen terminating.
                let mut terminating: HashMap<String, Instant> = HashMap::new();
                loop {
                    if let Ok(list) = pods.list(&ListParams::default()).await {
                        let mut current = HashMap::new();
                        for pod in list {
                            let Some(namespace) = pod.metadata.namespace.clone() else { continue };
                            let Some(name) = pod.metadata.name.clone() else { continue };
                            let scoped: Api<Pod> = Api::namespaced(client.clone(), &namespace);
                            if pod.metadata.deletion_timestamp.is_some() {
                                let key = format!("{namespace}/{name}/{}", pod.metadata.uid.as_deref().unwrap_or(""));
                                let since = *terminating.get(&key).unwrap_or(&Instant::now());
                                if since.elapsed() >= finish_after {
                                    let gone = scoped.delete(&name, &DeleteParams::default().grace_period(0)).await;
                                    if gone.is_ok() {
                                        finished.fetch_add(1, Ordering::Relaxed);
                                    }
                                } else {
                                    current.insert(key, since);
                                }
                            } else if bind(&scoped, pod).await {
                                bound.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                        terminating = current;
                    }
                    tokio::time::sleep(LOOK_EVERY).await;
                }
            }
        })
        .abort_handle();
        Self { task, bound, finished }
    }

    /// Pods bound so far.
    pub fn bound(&self) -> usize {
        self.bound.load(Ordering::Relaxed)
    }

    /// Deletes finished so far.
    pub fn finished(&self) -> usize {
        self.finished.load(Ordering::Relaxed)
    }
}

impl Drop for Kubelet {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Bind `pod` if it is a pending daemon pod: true if bound now.
pub async fn bind(pods: &Api<Pod>, pod: Pod) -> bool {
    // The shape the exporter reads, so that the pod is bound where the exporter looks.
    let pod = misschedule_exporter::k8s::slim::SlimPod::from(pod);
    let Some(spec) = pod.spec.as_ref() else { return false };
    if spec.node_name.is_some() {
        return false;
    }
    let Some(node) = misschedule_exporter::k8s::convert::target_node_name(spec) else { return false };
    let Some(name) = pod.metadata.name.as_deref() else { return false };
    let binding = json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node}});
    let bound: Result<Value, _> = pods.create_subresource("binding", name, &PostParams::default(), &binding).await;
    bound.is_ok()
}
