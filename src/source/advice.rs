//! What an API server's refusal means for this tool, and what to do about it, in one line:
//! the watches' logs and health, the one-shot commands and the plugin all say it the same way.

/// The verbs and resources every reader of the cluster needs (the chart's ClusterRole).
pub const NEEDED: &str = "grant get, list and watch on nodes, pods, daemonsets.apps and controllerrevisions.apps";

/// What to do after an HTTP error status, when there is one thing to do.
pub fn for_status(code: u16) -> Option<&'static str> {
    match code {
        401 => Some("the API server rejected the credentials: renew the token or fix the kubeconfig's user"),
        403 => Some(NEEDED),
        429 => Some("the API server is throttling this client (API priority and fairness); try again shortly"),
        _ => None,
    }
}

/// One line for an HTTP error status and the API server's message.
pub fn status_line(code: u16, message: &str) -> String {
    let message = if message.is_empty() { "no message" } else { message };
    match for_status(code) {
        Some(advice) => format!("{message} (HTTP {code}); {advice}"),
        None => format!("HTTP {code}: {message}"),
    }
}

/// One line for a kube client error: the API server's message with what to do, or the
/// transport error with each cause once (kube's errors repeat their source in their text).
pub fn kube_error_line(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(status) => status_line(status.code, &status.message),
        other => chain_line(other),
    }
}

/// An error and its causes, each said once: a cause whose text the line already holds
/// adds nothing.
pub fn chain_line(error: &(dyn std::error::Error + 'static)) -> String {
    let mut line = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !text.is_empty() && !line.contains(&text) {
            line.push_str(": ");
            line.push_str(&text);
        }
        source = cause.source();
    }
    line
}

/// The innermost cause: what actually went wrong, without the layers that restate it.
pub fn root_cause(error: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = error;
    while let Some(next) = cause.source() {
        cause = next;
    }
    cause.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("cannot read kubeconfig: {0}")]
    struct Outer(#[source] Inner);

    #[derive(Debug, thiserror::Error)]
    #[error("failed to read '{0}'")]
    struct Inner(String, #[source] std::io::Error);

    #[test]
    fn a_refusal_says_what_to_grant() {
        let line = status_line(403, "nodes is forbidden: User \"x\" cannot list resource \"nodes\"");
        assert_eq!(
            line,
            "nodes is forbidden: User \"x\" cannot list resource \"nodes\" (HTTP 403); grant get, list and watch on nodes, pods, daemonsets.apps and controllerrevisions.apps"
        );
        assert!(status_line(401, "Unauthorized").contains("renew the token"));
        assert_eq!(status_line(500, ""), "HTTP 500: no message");
    }

    #[test]
    fn a_cause_is_said_once() {
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "No such file or directory (os error 2)");
        let error = Outer(Inner("./missing".into(), io));
        assert_eq!(
            chain_line(&error),
            "cannot read kubeconfig: failed to read './missing': No such file or directory (os error 2)"
        );
        assert_eq!(root_cause(&error), "No such file or directory (os error 2)");
    }
}
