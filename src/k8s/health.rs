//! What a daemon pod's status says of its availability, read into the model's one-byte
//! `PodHealth`, when it entered it, and a short detail (`rules::uncovered` names the rest).

use crate::k8s::slim::{ConditionKind, ContainerStatus, PodCondition, PodStatus};
use crate::model::{Pod, PodHealth, Timestamp};
use crate::rules::uncovered::{self, waiting_health};

/// What a pod's status says of its availability.
pub struct HealthRead {
    pub health: PodHealth,
    /// When it entered that health: the condition's lastTransitionTime.
    pub since: Option<Timestamp>,
    /// Why not available, short and the same for every pod that fails the same way.
    pub detail: Option<String>,
}

/// `podutil.IsPodReady`, and otherwise what stands in the way, in the order a pod meets
/// it: the scheduler (`PodScheduled=False`, `Unschedulable`), then a container the kubelet
/// keeps waiting (init containers first), then containers being created, then a readiness
/// that does not come.
pub fn read_health(status: Option<&PodStatus>) -> HealthRead {
    let Some(status) = status else { return HealthRead { health: PodHealth::Pending, since: None, detail: None } };
    let condition = |kind| status.conditions.get(kind);
    let (ready, scheduled) = (condition(ConditionKind::Ready), condition(ConditionKind::PodScheduled));
    let at = |c: Option<&PodCondition>| c.and_then(|c| c.last_transition);
    if ready.is_some_and(|c| c.true_) {
        return HealthRead { health: PodHealth::Ready, since: at(ready), detail: None };
    }
    if let Some(c) = scheduled.filter(|c| !c.true_ && c.reason.as_deref() == Some("Unschedulable")) {
        let detail = c.message.as_deref().map(|m| uncovered::short(&uncovered::scheduler_detail(m)));
        return HealthRead { health: PodHealth::Unschedulable, since: at(scheduled), detail };
    }
    let containers = status.init_container_statuses.iter().chain(&status.container_statuses);
    let waiting = containers.clone().filter_map(|c| Some((c, c.state.waiting.as_ref()?.reason.as_deref()?)));
    let since = at(ready).or(at(scheduled));
    if let Some((container, health, reason)) = waiting.clone().find_map(|(c, r)| Some((c, waiting_health(r)?, r))) {
        return HealthRead { health, since, detail: Some(waiting_detail(container, health, reason)) };
    }
    let health = if !scheduled.is_some_and(|c| c.true_) {
        PodHealth::Pending
    } else if waiting.clone().next().is_some() || containers.clone().next().is_none() {
        PodHealth::Creating
    } else {
        PodHealth::NotReady
    };
    HealthRead { health, since, detail: None }
}

/// What a waiting container's trouble is, in words every pod of the DaemonSet that fails
/// the same way shares: the image, the container and its last exit, the kubelet's message
/// for a missing Secret or ConfigMap. The kubelet's CrashLoopBackOff message names the pod
/// and its UID, so it is left out.
fn waiting_detail(container: &ContainerStatus, health: PodHealth, reason: &str) -> String {
    let waiting = container.state.waiting.as_ref();
    let message = waiting.and_then(|w| w.message.as_deref()).unwrap_or_default();
    let text = match health {
        PodHealth::ImagePull => format!("{reason}: image {}", container.image),
        PodHealth::CrashLoop => match &container.last_state.terminated {
            Some(t) => format!(
                "{reason}: container {} exited {} ({})",
                container.name,
                t.exit_code,
                t.reason.as_deref().unwrap_or("Error")
            ),
            None => format!("{reason}: container {}", container.name),
        },
        _ if message.is_empty() => format!("{reason}: container {}", container.name),
        _ => format!("{reason}: {message}"),
    };
    uncovered::short(&text)
}

/// Seconds from `created` to `at`, as the pod keeps them: 0 before it or when unknown.
pub(crate) fn offset_from(created: Timestamp, at: Option<Timestamp>) -> u32 {
    at.map_or(0, |at| u32::try_from(at.saturating_sub(created).max(0)).unwrap_or(u32::MAX))
}

/// The health `pod` would keep, compared without interning; a healthy pod's costs no
/// allocation.
pub(crate) fn same_health(status: Option<&PodStatus>, cached: &Pod) -> bool {
    let read = read_health(status);
    read.health == cached.health()
        && offset_from(cached.created(), read.since) == cached.health_offset()
        && read.detail.as_deref() == cached.detail().map(|d| &**d)
}
