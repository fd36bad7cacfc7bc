//! Streaming lists (KEP-3157): the list as the first events of a watch that asks for them
//! (`sendInitialEvents=true`, `resourceVersionMatch=NotOlderThan`), served from the API
//! server's watch cache with no etcd read, one object per line, and ended by a bookmark
//! annotated `k8s.io/initial-events-end`. client-go lists this way by default since 1.35.
//! Where a server refuses the request or ignores it, the watch lists in pages instead, as
//! client-go's reflector does. Pure: what a streamed event means, and what a refusal means.

use kube::api::WatchEvent;

use super::call_error::CallError;

/// The annotation of the bookmark that ends a streaming list's initial events.
pub const INITIAL_EVENTS_END: &str = "k8s.io/initial-events-end";

/// How each list (the first, and every relist) is fetched: `--list-mode`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum ListMode {
    /// Stream where the API server can; else pages, from then on.
    #[default]
    Auto,
    /// Stream only: a server that cannot is a failure.
    Stream,
    /// Pages only (`limit`/`continue`, or one piece with --use-apiserver-cache).
    Pages,
}

/// What one event of a streaming list means.
#[derive(Debug)]
pub enum Initial<K> {
    /// An object of the list.
    Object(K),
    /// The list is complete at this resourceVersion: watch from it.
    End(String),
    /// The server does not stream: it answered as to a plain watch.
    Ignored(&'static str),
}

/// Reads one event of a streaming list. Every initial event is an ADDED; the server that
/// honours the request ends them with the annotated bookmark, before any other bookmark
/// or change. One that ignores it sends changes or plain bookmarks instead.
pub fn initial<K>(event: WatchEvent<K>) -> Result<Initial<K>, CallError> {
    Ok(match event {
        WatchEvent::Added(object) => Initial::Object(object),
        WatchEvent::Bookmark(bookmark) => {
            if bookmark.metadata.annotations.get(INITIAL_EVENTS_END).is_some_and(|v| v == "true") {
                Initial::End(bookmark.metadata.resource_version)
            } else {
                Initial::Ignored("a bookmark without k8s.io/initial-events-end came first")
            }
        }
        WatchEvent::Modified(_) | WatchEvent::Deleted(_) => {
            Initial::Ignored("a change came before the initial events ended")
        }
        WatchEvent::Error(status) => return Err(CallError::WatchStatus { code: status.code, message: status.message }),
    })
}

/// Whether a failed streaming list says the server cannot stream: it ignored the request
/// (`NoStreaming`), or refused it as an older API server does, or one with the WatchList
/// feature off (400 or 422 "sendInitialEvents is forbidden"); rather than a failure a
/// paged list would meet as well (RBAC, throttling, an outage, a cut).
pub fn cannot_stream(error: &CallError) -> bool {
    matches!(error, CallError::NoStreaming(_) | CallError::Status { code: 400 | 405 | 406 | 415 | 422, .. })
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Node;

    use super::*;

    fn event(line: &str) -> WatchEvent<Node> {
        serde_json::from_str(line).unwrap()
    }

    #[test]
    fn the_annotated_bookmark_ends_the_list_and_anything_else_unexpected_means_ignored() {
        let added = event(r#"{"type":"ADDED","object":{"metadata":{"name":"n1","resourceVersion":"5"}}}"#);
        assert!(matches!(initial(added), Ok(Initial::Object(n)) if n.metadata.name.as_deref() == Some("n1")));
        let end = event(
            r#"{"type":"BOOKMARK","object":{"kind":"Node","apiVersion":"v1","metadata":{"resourceVersion":"9","annotations":{"k8s.io/initial-events-end":"true"}}}}"#,
        );
        assert!(matches!(initial(end), Ok(Initial::End(v)) if v == "9"));
        let plain = event(
            r#"{"type":"BOOKMARK","object":{"kind":"Node","apiVersion":"v1","metadata":{"resourceVersion":"9"}}}"#,
        );
        assert!(matches!(initial(plain), Ok(Initial::Ignored(_))));
        let changed = event(r#"{"type":"MODIFIED","object":{"metadata":{"name":"n1","resourceVersion":"6"}}}"#);
        assert!(matches!(initial(changed), Ok(Initial::Ignored(_))));
        let gone = event(
            r#"{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","status":"Failure","message":"too old","reason":"Expired","code":410}}"#,
        );
        assert!(initial(gone).is_err_and(|e| e.is_expired()));
    }

    #[test]
    fn only_a_bad_request_or_an_ignored_one_falls_back_to_pages() {
        let status = |code| CallError::Status { code, message: String::new(), retry_after: None };
        for code in [400, 422] {
            assert!(cannot_stream(&status(code)), "{code}");
        }
        assert!(cannot_stream(&CallError::NoStreaming("a plain bookmark came first".into())));
        for code in [401, 403, 404, 410, 429, 500, 503] {
            assert!(!cannot_stream(&status(code)), "{code}");
        }
        assert!(!cannot_stream(&CallError::Cut("x".into())));
    }
}
