//! Ours: whether the admission guard lets a change through. What the controller would do
//! is what-if's (`whatif::effect`, the controller's `podsShouldBeOnNode`); this decides
//! what the guard does about it, from annotations and who asks.
//!
//! - `misschedule.io/guard: deny` on a DaemonSet: a change that would delete its pods or
//!   leave them running misscheduled is refused.
//! - `misschedule.io/guard-bypass: <why>` on the changed node or DaemonSet lets such a
//!   change through; the why goes to the audit log.
//! - Users the operator exempts (nfd-master, a migration job) are warned, never refused.
//!
//! Anything else is warn-only: the guard's default never stands in anyone's way.

use std::collections::BTreeMap;

pub const GUARD_ANNOTATION: &str = "misschedule.io/guard";
/// The value of [`GUARD_ANNOTATION`] that makes the guard refuse.
pub const DENY: &str = "deny";
pub const BYPASS_ANNOTATION: &str = "misschedule.io/guard-bypass";

type Annotations = BTreeMap<String, String>;

/// Whether a DaemonSet asks the guard to refuse changes that disrupt it.
pub fn refuses_disruption(annotations: Option<&Annotations>) -> bool {
    annotations.and_then(|a| a.get(GUARD_ANNOTATION)).is_some_and(|v| v.trim() == DENY)
}

/// The reason given for going ahead anyway, if the changed object carries one. An empty
/// value gives none: a bypass says why.
pub fn bypass(annotations: Option<&Annotations>) -> Option<&str> {
    let why = annotations?.get(BYPASS_ANNOTATION)?.trim();
    (!why.is_empty()).then_some(why)
}

/// What the guard does with a change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision<'a> {
    /// Nothing a protected DaemonSet refuses: let through, with warnings if anything moves.
    Allow,
    /// It disrupts a protected DaemonSet, and the changed object says why to go ahead.
    Bypassed(&'a str),
    /// It disrupts a protected DaemonSet, and the user is exempt.
    Exempt,
    Refuse,
}

/// The decision for a change that does (`disrupts_protected`) or does not disrupt a
/// protected DaemonSet's pods.
pub fn decide<'a>(disrupts_protected: bool, bypass: Option<&'a str>, user_exempt: bool) -> Decision<'a> {
    match (disrupts_protected, bypass, user_exempt) {
        (false, _, _) => Decision::Allow,
        (true, Some(why), _) => Decision::Bypassed(why),
        (true, None, true) => Decision::Exempt,
        (true, None, false) => Decision::Refuse,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn annotations(pairs: &[(&str, &str)]) -> Annotations {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn only_deny_refuses() {
        assert!(refuses_disruption(Some(&annotations(&[(GUARD_ANNOTATION, "deny")]))));
        assert!(refuses_disruption(Some(&annotations(&[(GUARD_ANNOTATION, " deny\n")]))));
        for value in ["warn", "Deny", "", "true"] {
            assert!(!refuses_disruption(Some(&annotations(&[(GUARD_ANNOTATION, value)]))), "{value:?}");
        }
        assert!(!refuses_disruption(None));
    }

    #[test]
    fn a_bypass_says_why() {
        assert_eq!(bypass(Some(&annotations(&[(BYPASS_ANNOTATION, " pool migration ")]))), Some("pool migration"));
        assert_eq!(bypass(Some(&annotations(&[(BYPASS_ANNOTATION, "  ")]))), None);
        assert_eq!(bypass(Some(&annotations(&[("other", "x")]))), None);
    }

    #[test]
    fn refusal_needs_a_protected_disruption_and_neither_bypass_nor_exemption() {
        assert_eq!(decide(false, None, false), Decision::Allow);
        assert_eq!(decide(false, Some("why"), true), Decision::Allow);
        assert_eq!(decide(true, Some("why"), false), Decision::Bypassed("why"));
        assert_eq!(decide(true, Some("why"), true), Decision::Bypassed("why"));
        assert_eq!(decide(true, None, true), Decision::Exempt);
        assert_eq!(decide(true, None, false), Decision::Refuse);
    }
}
