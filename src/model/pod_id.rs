//! A pod's namespace, name and controller, and what it shares with the other pods of its
//! DaemonSet's revision, kept without an allocation of its own.

use std::fmt;
use std::sync::Arc;

use crate::model::{Labels, ObjectRef, Placement, Str};

/// The longest end of a name kept inline: a daemon pod's is 5 characters (the controller's
/// `generateName` suffix), and 7 puts the whole id in 16 bytes.
const REST: usize = 7;

/// Daemon pods are named `<generateName><five characters>`. The namespace, the name up to
/// its last `-`, the controller, the labels and the own placement are shared by all the
/// pods of a DaemonSet's revision (`Interner::pod_id`), behind one pointer, and the rest of
/// the name is kept inline: a string of its own would cost each of millions of pods 32
/// bytes more, and a second pointer for the labels 8. A name whose end is longer is shared
/// whole, as its own scope.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct PodId {
    scope: Arc<PodScope>,
    rest: [u8; REST],
    rest_len: u8,
}

/// What the pods of one DaemonSet's revision share.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct PodScope {
    pub namespace: Str,
    pub prefix: Str,
    /// UID of the controller ownerReference, whatever its kind: claiming compares UIDs only.
    /// `None` makes the pod an orphan that a DaemonSet may adopt.
    pub controller_uid: Option<Str>,
    pub labels: Labels,
    /// The pod's own nodeSelector and tolerations (its affinity is the controller's
    /// `matchFields` rewrite, so `required_terms` here is always `None`).
    pub own_placement: Arc<Placement>,
}

impl PodId {
    /// How `name` splits into a shared prefix and an inline rest.
    pub fn split(name: &str) -> (&str, &str) {
        // After the last `-`: a byte that is ASCII, so a character boundary.
        let after_dash = name.rfind('-').map_or(0, |at| at + 1);
        match name.split_at(after_dash) {
            (prefix, rest) if rest.len() <= REST => (prefix, rest),
            _ if name.len() <= REST => ("", name),
            _ => (name, ""),
        }
    }

    /// `scope` must be the scope of `name`'s prefix (`split`).
    pub fn new(scope: Arc<PodScope>, rest: &str) -> Self {
        let mut inline = [0; REST];
        let len = rest.len().min(REST);
        inline[..len].copy_from_slice(&rest.as_bytes()[..len]);
        Self { scope, rest: inline, rest_len: len as u8 }
    }

    pub fn namespace(&self) -> &Str {
        &self.scope.namespace
    }

    pub fn controller_uid(&self) -> Option<&Str> {
        self.scope.controller_uid.as_ref()
    }

    /// What it shares with the other pods of its DaemonSet's revision.
    pub fn scope(&self) -> &PodScope {
        &self.scope
    }

    /// The name, built: for output, not for the hot paths.
    pub fn name(&self) -> String {
        let mut name = String::with_capacity(self.scope.prefix.len() + usize::from(self.rest_len));
        name.push_str(&self.scope.prefix);
        name.push_str(self.rest());
        name
    }

    /// The reference an Event names the pod by.
    pub fn to_object_ref(&self) -> ObjectRef {
        ObjectRef { namespace: self.namespace().clone(), name: Str::from(self.name()) }
    }

    /// The name's bytes in order, without building it.
    fn name_bytes(&self) -> impl Iterator<Item = u8> + '_ {
        self.scope.prefix.bytes().chain(self.rest().bytes())
    }

    fn rest(&self) -> &str {
        // Cut from a `str` at a character boundary (`split`), so always valid.
        std::str::from_utf8(&self.rest[..usize::from(self.rest_len)]).unwrap_or_default()
    }
}

/// Compares the name, without building it.
impl PartialEq<str> for PodId {
    fn eq(&self, name: &str) -> bool {
        name.strip_prefix(&*self.scope.prefix).is_some_and(|rest| rest == self.rest())
    }
}

/// By namespace, then name, as `ObjectRef`s sort: the tie-break among pods created in the
/// same second.
impl Ord for PodId {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.namespace().cmp(other.namespace()).then_with(|| self.name_bytes().cmp(other.name_bytes()))
    }
}

impl PartialOrd for PodId {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// The name (not the namespace), as `kubectl` prints it.
impl fmt::Display for PodId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.scope.prefix)?;
        f.write_str(self.rest())
    }
}

impl fmt::Debug for PodId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{self}", self.namespace())
    }
}

const _: () = assert!(std::mem::size_of::<PodId>() == 16);

#[cfg(test)]
mod tests {
    use super::*;

    fn id(namespace: &str, name: &str) -> PodId {
        let (prefix, rest) = PodId::split(name);
        PodId::new(
            Arc::new(PodScope {
                namespace: namespace.into(),
                prefix: prefix.into(),
                controller_uid: None,
                labels: Labels::default(),
                own_placement: Arc::default(),
            }),
            rest,
        )
    }

    #[test]
    fn any_name_comes_back_whole() {
        for name in
            ["agent-7vjdr", "agent", "a-b-c-xyz12", "x-", "-", "", "no-dash-but-a-very-long-end-x", "ünïcødé-ñame"]
        {
            let pod = id("kube-system", name);
            assert_eq!(pod.name(), name);
            assert_eq!(pod.to_string(), name);
            assert!(pod == *name, "{name}");
            assert!(pod != *format!("{name}x"), "{name}");
            assert_eq!(**pod.namespace(), *"kube-system");
        }
    }

    #[test]
    fn ids_sort_as_namespace_and_name() {
        let names = ["a-b", "a-", "a", "ab-1", "a-bc", "b", "a-b-c"];
        let mut ids: Vec<PodId> = names.iter().map(|n| id("ns", n)).collect();
        ids.push(id("a-namespace", "z"));
        ids.sort();
        let mut expected: Vec<(&str, &str)> = names.iter().map(|n| ("ns", *n)).collect();
        expected.push(("a-namespace", "z"));
        expected.sort();
        let got: Vec<(String, String)> = ids.iter().map(|i| (i.namespace().to_string(), i.name())).collect();
        let expected: Vec<(String, String)> = expected.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect();
        assert_eq!(got, expected);
    }

    #[test]
    fn daemon_pods_share_their_prefix_and_keep_the_rest_inline() {
        assert_eq!(PodId::split("agent-7vjdr"), ("agent-", "7vjdr"));
        assert_eq!(PodId::split("agent"), ("", "agent"));
        assert_eq!(PodId::split("a-very-long-name-without-a-short-end"), ("a-very-long-name-without-a-short-", "end"));
        assert_eq!(PodId::split("averyveryverylongnamenodash"), ("averyveryverylongnamenodash", ""));
    }
}
