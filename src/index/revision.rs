//! ControllerRevision events: the template each pod was created from, by owner and hash.

use super::Index;
use crate::model::{DaemonSet, Pod, Revision};

impl Index {
    pub(super) fn upsert_revision(&mut self, rev: Box<Revision>) {
        if self.revisions.objects.get(&rev.uid) == Some(&rev) {
            return;
        }
        self.generation += 1;
        self.remove_revision(&rev.uid.clone());
        if let (Some(owner), Some(hash)) = (&rev.owner_uid, &rev.hash) {
            self.revision_by_hash.insert((owner.clone(), hash.clone()), rev.uid.clone());
        }
        self.revisions.objects.insert(rev.uid.clone(), rev);
    }

    pub(super) fn remove_revision(&mut self, uid: &str) {
        let Some(rev) = self.revisions.objects.remove(uid) else { return };
        self.generation += 1;
        if let (Some(owner), Some(hash)) = (rev.owner_uid, rev.hash) {
            let key = (owner, hash);
            if self.revision_by_hash.get(&key).is_some_and(|u| **u == *uid) {
                self.revision_by_hash.remove(&key);
            }
        }
    }

    pub(super) fn revision_of(&self, ds: &DaemonSet, pod: &Pod) -> Option<&Revision> {
        let key = (ds.uid.clone(), pod.revision_hash()?.clone());
        self.revisions.objects.get(self.revision_by_hash.get(&key)?).map(|rev| &**rev)
    }
}
