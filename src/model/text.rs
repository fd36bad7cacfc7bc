//! String equality for the paths that compare what a watch event carries with what the
//! index holds, millions of times at the largest scale.

use crate::model::TolerationParts;

/// `a == b`, but two empty strings are equal without calling `memcmp`. An empty Rust
/// string points at a dangling address (0x1: `""` literals, `String::new()`, serde's empty
/// strings), and glibc's AVX-512 `memcmp` still loads from it for zero bytes. On CPUs that
/// take a microcode assist for that load, each such comparison cost 90–150 ns against 2 ns
/// (measured on the bench host); a daemon pod carries about eight empty toleration values.
#[inline]
pub fn same_str(a: &str, b: &str) -> bool {
    a.len() == b.len() && (a.is_empty() || a == b)
}

#[inline]
pub fn same_pair((a_key, a_value): (&str, &str), (b_key, b_value): (&str, &str)) -> bool {
    same_str(a_key, b_key) && same_str(a_value, b_value)
}

#[inline]
pub fn same_toleration(a: TolerationParts<'_>, b: TolerationParts<'_>) -> bool {
    let ((a_key, a_op, a_value, a_effect), (b_key, b_op, b_value, b_effect)) = (a, b);
    a_op == b_op && a_effect == b_effect && same_str(a_key, b_key) && same_str(a_value, b_value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{TaintEffect, TolerationOperator};

    #[test]
    fn agrees_with_str_equality() {
        let words = ["", "a", "b", "ab", "node.kubernetes.io/not-ready"];
        for a in words {
            for b in words {
                assert_eq!(same_str(a, b), a == b, "{a:?} {b:?}");
                assert_eq!(same_str(&String::from(a), b), a == b, "{a:?} {b:?}");
                assert!(same_pair((a, b), (a, b)));
                assert_eq!(same_pair((a, a), (b, b)), a == b);
            }
        }
        let t = ("", TolerationOperator::Exists, "", Some(TaintEffect::NoExecute));
        assert!(same_toleration(t, t));
        assert!(!same_toleration(t, ("", TolerationOperator::Exists, "", None)));
        assert!(!same_toleration(t, ("", TolerationOperator::Equal, "", Some(TaintEffect::NoExecute))));
        assert!(!same_toleration(t, ("k", TolerationOperator::Exists, "", Some(TaintEffect::NoExecute))));
    }
}
