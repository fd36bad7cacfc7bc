//! The label syntax apimachinery checks (`k8s.io/apimachinery/pkg/util/validation`).
//!
//! `labels.NewRequirement` applies these to every node-affinity requirement the
//! DaemonSet controller evaluates, and an invalid requirement fails its whole term.
//! The API server does not validate affinity values, so such templates exist.

const QUALIFIED_NAME_MAX: usize = 63;
const DNS1123_SUBDOMAIN_MAX: usize = 253;
const LABEL_VALUE_MAX: usize = 63;

/// `IsQualifiedName`: a label key, `[prefix/]name`, where the prefix is a DNS-1123
/// subdomain and the name is at most 63 alphanumerics with `-`, `_`, `.` inside.
pub fn is_qualified_name(key: &str) -> bool {
    let name = match key.split_once('/') {
        None => key,
        Some((prefix, name)) => {
            if !is_dns1123_subdomain(prefix) || name.contains('/') {
                return false;
            }
            name
        }
    };
    !name.is_empty() && name.len() <= QUALIFIED_NAME_MAX && is_name_part(name)
}

/// `IsValidLabelValue`: empty, or a name part of at most 63 characters.
pub fn is_label_value(value: &str) -> bool {
    value.is_empty() || (value.len() <= LABEL_VALUE_MAX && is_name_part(value))
}

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`, for a non-empty string.
fn is_name_part(s: &str) -> bool {
    let bytes = s.as_bytes();
    let (Some(first), Some(last)) = (bytes.first(), bytes.last()) else { return false };
    first.is_ascii_alphanumeric()
        && last.is_ascii_alphanumeric()
        && bytes.iter().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// `IsDNS1123Subdomain`: lowercase labels of `[a-z0-9]([-a-z0-9]*[a-z0-9])?` joined by dots.
fn is_dns1123_subdomain(s: &str) -> bool {
    s.len() <= DNS1123_SUBDOMAIN_MAX
        && s.split('.').all(|label| {
            let bytes = label.as_bytes();
            let alnum = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
            match (bytes.first(), bytes.last()) {
                (Some(first), Some(last)) => {
                    alnum(first) && alnum(last) && bytes.iter().all(|b| alnum(b) || *b == b'-')
                }
                _ => false,
            }
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qualified_names() {
        for ok in ["a", "zone", "GPU", "kernel-version", "metadata.name", "a_b", "example.com/x", "k8s.io/A.b-c_d"] {
            assert!(is_qualified_name(ok), "{ok}");
        }
        let long_name = "n".repeat(64);
        let long_prefix = format!("{}/x", "p".repeat(254));
        for bad in [
            "",
            "invalid key",
            "-a",
            "a-",
            "/a",
            "a/",
            "a/b/c",
            "Example.com/x",
            "ex_ample.com/x",
            ".com/x",
            long_name.as_str(),
            long_prefix.as_str(),
        ] {
            assert!(!is_qualified_name(bad), "{bad}");
        }
        assert!(is_qualified_name(&"n".repeat(63)));
        assert!(is_qualified_name(&format!("{}/x", "p".repeat(253))));
    }

    #[test]
    fn label_values() {
        for ok in ["", "a", "0204", "label_1_val", "NVIDIA-GRID-K1", "a.b"] {
            assert!(is_label_value(ok), "{ok}");
        }
        for bad in ["invalid value: ___@#$%^", "-5", "+5", "a b", "a/b", "_a", "a."] {
            assert!(!is_label_value(bad), "{bad}");
        }
        assert!(is_label_value(&"v".repeat(63)));
        assert!(!is_label_value(&"v".repeat(64)));
    }
}
