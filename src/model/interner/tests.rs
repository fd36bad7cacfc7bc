//! The interner shares what is equal and lets go of what nothing holds.

use super::*;

#[test]
fn equal_values_share_one_allocation() {
    let mut interner = Interner::default();
    let a = interner.str("node-a");
    let b = interner.str("node-a");
    assert!(Arc::ptr_eq(&a, &b));
    let thin = interner.thin_str("node-a");
    assert!(Arc::ptr_eq(&thin, &a), "a thin string points at the shared one");
    assert!(std::ptr::eq(&**thin, &**interner.thin_str("node-a")));
    let l1 = interner.labels([("app", "agent")]);
    let l2 = interner.labels([("app", "agent")]);
    assert!(Arc::ptr_eq(&l1, &l2));
    let keys = interner.keys(["zone", "app"].into_iter());
    assert!(Arc::ptr_eq(&keys, &interner.keys(["zone", "app"].into_iter())));
    assert!(!Arc::ptr_eq(&keys, &interner.keys(["app", "zone"].into_iter())), "a list keeps its order");
    assert!(Arc::ptr_eq(&keys[1], &interner.str("app")));
}

#[test]
fn label_sets_share_the_pairs_they_have_in_common() {
    let mut interner = Interner::default();
    let pairs = |host: &str| [("kubernetes.io/hostname".to_owned(), host.to_owned()), ("zone".into(), "z1".into())];
    let (a, b) = (pairs("a"), pairs("b"));
    let (on_a, on_b) = (
        interner.labels(a.iter().map(|(k, v)| (k.as_str(), v.as_str()))),
        interner.labels(b.iter().map(|(k, v)| (k.as_str(), v.as_str()))),
    );
    let zone = |set: &LabelSet| set.iter().find(|(k, _)| &***k == "zone").map(|(k, _)| k as *const Str);
    assert_eq!(zone(&on_a), zone(&on_b), "one zone=z1 pair, in both sets");
    assert_eq!(on_a.get("kubernetes.io/hostname").map(|h| &**h), Some("a"));
    drop(on_a);
    interner.collect_garbage();
    assert_eq!(interner.label_pairs.len(), 2, "a's hostname pair went with a's set: {interner:?}");
}

#[test]
fn garbage_collection_drops_only_unreferenced_values() {
    let mut interner = Interner::default();
    let kept = interner.str("kept");
    drop(interner.str("dropped"));
    drop(interner.thin_str("dropped too"));
    drop(interner.keys(["dropped", "as a list"].into_iter()));
    interner.collect_garbage();
    assert_eq!(interner.len(), 1, "{interner:?}");
    assert!(Arc::ptr_eq(&kept, &interner.str("kept")));
}

#[test]
fn a_pod_scope_is_shared_and_lets_go_of_its_parts_when_dropped() {
    let mut interner = Interner::default();
    let (app, x, y) = ("app".to_owned(), "x".to_owned(), "y".to_owned());
    let id = |interner: &mut Interner, name: &str, value: &String| {
        let labels = interner.labels([(app.as_str(), value.as_str())]);
        let placement = interner.placement(Placement::default());
        interner.pod_id("ns", name, Some("ds"), labels, placement)
    };
    let (first, second) = (id(&mut interner, "agent-abcde", &x), id(&mut interner, "agent-fghij", &x));
    assert!(std::ptr::eq(first.scope(), second.scope()), "one scope for the pods of a revision");
    let relabelled = id(&mut interner, "agent-abcde", &y);
    assert!(!std::ptr::eq(first.scope(), relabelled.scope()), "other labels, another scope");
    assert_eq!(relabelled.scope().labels.get("app").map(|v| &**v), Some("y"));
    drop((first, second, relabelled));
    interner.collect_garbage();
    assert_eq!(interner.len(), 0, "the scopes, then their labels, placement and strings: {interner:?}");
}

#[test]
fn field_owners_of_a_kind_share_what_they_own() {
    let mut interner = Interner::default();
    let kubelet = interner.owned_fields("kubelet", ["kubernetes.io/hostname", "kubernetes.io/os"].into_iter(), false);
    let again = interner.owned_fields("kubelet", ["kubernetes.io/hostname", "kubernetes.io/os"].into_iter(), false);
    assert!(Arc::ptr_eq(&kubelet, &again), "the same manager owning the same keys: one allocation");
    let others = [
        interner.owned_fields("kubelet", ["kubernetes.io/hostname"].into_iter(), false),
        interner.owned_fields("kubelet", ["kubernetes.io/hostname", "kubernetes.io/os"].into_iter(), true),
        interner.owned_fields("nfd-master", ["kubernetes.io/hostname", "kubernetes.io/os"].into_iter(), false),
    ];
    assert!(others.iter().all(|o| !Arc::ptr_eq(o, &kubelet)), "other keys, taints or manager: {others:?}");
    drop((kubelet, again, others));
    interner.collect_garbage();
    assert_eq!(interner.len(), 0, "the owned fields, then their key lists and strings: {interner:?}");
}
