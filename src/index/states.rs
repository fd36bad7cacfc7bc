//! Each cached DaemonSet's state, kept at its DaemonSet's slot in the store.

use super::Index;
use super::daemonset_state::DaemonSetState;
use super::keyed::Slot;

/// The states of the cached DaemonSets, by their DaemonSets' slots (`Keyed`). A node event
/// walks the DaemonSets and finds each one's state at its slot, where a map by UID hashed
/// and compared a 36-byte UID for each. A removed DaemonSet's state goes with it, so a slot
/// taken again starts afresh.
#[derive(Debug, Default)]
pub(super) struct States(Vec<Option<DaemonSetState>>);

impl States {
    pub(super) fn get(&self, slot: Slot) -> Option<&DaemonSetState> {
        self.0.get(slot.index())?.as_ref()
    }

    pub(super) fn get_mut(&mut self, slot: Slot) -> Option<&mut DaemonSetState> {
        self.0.get_mut(slot.index())?.as_mut()
    }

    /// The state at `slot`, made empty if there is none.
    pub(super) fn or_default(&mut self, slot: Slot) -> &mut DaemonSetState {
        let at = slot.index();
        if at >= self.0.len() {
            self.0.resize_with(at + 1, || None);
        }
        self.0[at].get_or_insert_with(DaemonSetState::default)
    }

    pub(super) fn remove(&mut self, slot: Slot) {
        if let Some(state) = self.0.get_mut(slot.index()) {
            *state = None;
        }
    }

    pub(super) fn values(&self) -> impl Iterator<Item = &DaemonSetState> {
        self.0.iter().flatten()
    }

    pub(super) fn values_mut(&mut self) -> impl Iterator<Item = &mut DaemonSetState> {
        self.0.iter_mut().flatten()
    }
}

impl Index {
    /// The state of the DaemonSet whose UID is `uid`, if it is cached.
    pub(super) fn state(&self, uid: &str) -> Option<&DaemonSetState> {
        self.states.get(self.daemonsets.objects.slot(uid)?)
    }

    pub(super) fn state_mut(&mut self, uid: &str) -> Option<&mut DaemonSetState> {
        self.states.get_mut(self.daemonsets.objects.slot(uid)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::node_ids::NodeId;

    #[test]
    fn a_slot_taken_again_starts_afresh() {
        let mut states = States::default();
        let (first, third) = (Slot::at(0), Slot::at(2));
        assert!(states.get(third).is_none() && states.get_mut(third).is_none(), "beyond the end: none");
        let (node, pod) = (NodeId::at(1), Slot::at(5));
        states.or_default(third).claim(node, pod, 2);
        assert!(states.get(first).is_none(), "the slots before stay empty");
        assert_eq!(
            states.or_default(third).claims().get(node).as_deref(),
            Some(&[pod][..]),
            "an existing state is kept"
        );
        assert_eq!(states.values().count(), 1);
        states.remove(third);
        states.remove(Slot::at(9));
        assert!(states.get(third).is_none() && states.values_mut().next().is_none());
        assert!(states.or_default(third).claims().get(node).is_none(), "a removed state does not come back");
    }
}
