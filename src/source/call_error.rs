//! How a call to the API server failed, and the failure each way counts as.

use std::time::Duration;

use super::advice;
use super::progress::Failure;

/// Why a call brought nothing usable, in words that say which call.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    #[error("{}{}", advice::status_line(*code, message), retry_after.map(|d| format!(" (retry after {}s)", d.as_secs())).unwrap_or_default())]
    Status { code: u16, message: String, retry_after: Option<Duration> },
    #[error("watch ended with an ERROR event {code}: {message}")]
    WatchStatus { code: u16, message: String },
    #[error("no answer: {0}")]
    Unreachable(String),
    #[error("the response was cut off: {0}")]
    Cut(String),
    #[error("nothing arrived for {}s (no event, no bookmark, no data): the connection is stalled", .0.as_secs())]
    Stalled(Duration),
    /// A server that answered a streaming list as a plain watch.
    #[error("the API server does not stream lists ({0}); with --list-mode auto or pages the exporter lists in pages")]
    NoStreaming(String),
    /// `at`: "field `object.metadata.name`", or the text just before the error.
    #[error("cannot decode {what}, {at}: {error}")]
    Malformed { what: &'static str, at: String, error: String },
}

impl CallError {
    pub fn failure(&self) -> Failure {
        match self {
            Self::Status { code, .. } | Self::WatchStatus { code, .. } => failure_of_status(*code),
            Self::NoStreaming(_) => Failure::Refused,
            Self::Unreachable(_) => Failure::Unreachable,
            Self::Cut(_) => Failure::Cut,
            Self::Stalled(_) => Failure::Stalled,
            Self::Malformed { .. } => Failure::Malformed,
        }
    }

    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::Status { retry_after, .. } => *retry_after,
            _ => None,
        }
    }

    /// The resourceVersion is gone (410): relist, not a failure.
    pub fn is_expired(&self) -> bool {
        matches!(self, Self::Status { code: 410, .. } | Self::WatchStatus { code: 410, .. })
    }
}

/// The failure an HTTP error status (or a watch ERROR event's code) stands for.
pub fn failure_of_status(code: u16) -> Failure {
    match code {
        429 => Failure::Throttled,
        500..=599 => Failure::Unavailable,
        _ => Failure::Refused,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_name_their_failure() {
        assert_eq!(failure_of_status(429), Failure::Throttled);
        assert_eq!(failure_of_status(503), Failure::Unavailable);
        assert_eq!(failure_of_status(504), Failure::Unavailable);
        assert_eq!(failure_of_status(403), Failure::Refused);
        let labels: std::collections::HashSet<_> = Failure::COUNTED.map(Failure::as_str).into();
        assert_eq!(labels.len(), 7);
        assert!(!labels.contains(Failure::Stalled.as_str()), "a stall has its own counter");
    }
}
