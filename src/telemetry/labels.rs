//! The self-metrics' label vocabularies: each value a label takes, spelled once.

use kube::runtime::watcher::Event;
use prometheus_client::encoding::EncodeLabelSet;

use crate::index::Resource;

/// A watch event's kind, as the `type` label of `misschedule_exporter_watch_events_total` spells it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    Init,
    InitApply,
    InitDone,
    Apply,
    Delete,
}

impl EventType {
    pub const ALL: [EventType; 5] = [Self::Init, Self::InitApply, Self::InitDone, Self::Apply, Self::Delete];

    pub fn of<K>(event: &Event<K>) -> Self {
        match event {
            Event::Init => Self::Init,
            Event::InitApply(_) => Self::InitApply,
            Event::InitDone => Self::InitDone,
            Event::Apply(_) => Self::Apply,
            Event::Delete(_) => Self::Delete,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Init => "init",
            Self::InitApply => "init_apply",
            Self::InitDone => "init_done",
            Self::Apply => "apply",
            Self::Delete => "delete",
        }
    }
}

/// Why a watch or list call failed: the `reason` label of `watch_errors_total`
/// (`source::progress` decides which).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WatchFailure {
    /// 429: the API server (API Priority and Fairness) or a proxy throttles.
    Throttled,
    /// 5xx: the API server or a proxy in front of it cannot serve.
    Unavailable,
    /// Any other refusal: 401, 403 (RBAC), 404.
    Refused,
    /// No answer: connection refused or reset, TLS, a request timeout.
    Unreachable,
    /// The response stopped in the middle of an event or a list.
    Cut,
    /// The server closed the watch before its timeout without a single event or bookmark.
    EndedEarly,
    /// A line or a list the exporter cannot decode (`invalid_objects` counts objects that
    /// decode but make no sense; this is the stream itself).
    Malformed,
    /// Nothing arrived, not even a bookmark, for longer than the server stays silent.
    /// Counted in `watch_stalls_total`, not in `watch_errors_total`.
    Stalled,
}

impl WatchFailure {
    /// The reasons `watch_errors_total` counts (a stall has its own counter).
    pub const COUNTED: [Self; 7] = [
        Self::Throttled,
        Self::Unavailable,
        Self::Refused,
        Self::Unreachable,
        Self::Cut,
        Self::EndedEarly,
        Self::Malformed,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Throttled => "throttled",
            Self::Unavailable => "unavailable",
            Self::Refused => "refused",
            Self::Unreachable => "unreachable",
            Self::Cut => "cut",
            Self::EndedEarly => "ended_early",
            Self::Malformed => "malformed",
            Self::Stalled => "stalled",
        }
    }
}

/// Which credential files a reload concerns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CredentialFile {
    /// The certificate of `/metrics` (`--tls-cert-file`).
    Tls,
    Auth,
    /// The admission guard's certificate (`--webhook-tls-cert-file`).
    WebhookTls,
}

impl CredentialFile {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Tls => "tls",
            Self::Auth => "auth",
            Self::WebhookTls => "webhook_tls",
        }
    }
}

/// What became of an Event the exporter meant to write (`--events`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KubeEventResult {
    /// Written: a new Event, or a repeat counted on its series.
    Sent,
    /// Already written, by another replica or by this exporter before a restart; not written again.
    Exists,
    /// Over the rate limit; tried again in a later round.
    RateLimited,
    /// The API server throttles (429) or cannot serve (5xx); tried again in a later round.
    Unavailable,
    /// RBAC denies writing Events; not retried.
    Forbidden,
    Failed,
}

impl KubeEventResult {
    pub const ALL: [Self; 6] =
        [Self::Sent, Self::Exists, Self::RateLimited, Self::Unavailable, Self::Forbidden, Self::Failed];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Sent => "sent",
            Self::Exists => "exists",
            Self::RateLimited => "rate_limited",
            Self::Unavailable => "unavailable",
            Self::Forbidden => "forbidden",
            Self::Failed => "failed",
        }
    }
}

/// How a completed list was fetched: the `mode` label of `lists_total`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ListedBy {
    /// A streaming list (`sendInitialEvents`), from the API server's watch cache.
    Stream,
    /// Pages (`limit`/`continue`), or one piece from the watch cache.
    Pages,
}

impl ListedBy {
    pub const ALL: [ListedBy; 2] = [Self::Stream, Self::Pages];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Stream => "stream",
            Self::Pages => "pages",
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ListLabels {
    pub resource: &'static str,
    pub mode: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResourceLabels {
    pub resource: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct EventLabels {
    pub resource: &'static str,
    pub r#type: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ErrorLabels {
    pub resource: &'static str,
    pub reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct FileLabels {
    pub file: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReloadLabels {
    pub file: &'static str,
    pub result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct AdmissionLabels {
    pub resource: &'static str,
    pub verdict: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KubeEventLabels {
    pub result: &'static str,
}

pub fn resource_labels(resource: Resource) -> ResourceLabels {
    ResourceLabels { resource: resource.as_str() }
}
