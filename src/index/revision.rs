//! ControllerRevisions, cached by UID: the template each pod was created from, by owner and hash.

use k8s_openapi::api::apps::v1::ControllerRevision;

use super::{Index, Indexed, Resource, Store, Stored};
use crate::k8s::convert::{self, ConvertError};
use crate::model::interner::Interner;
use crate::model::{DaemonSet, Pod, Revision, Str};

impl Stored for Revision {
    const RESOURCE: Resource = Resource::ControllerRevisions;
    type Key = Str;

    fn key(&self) -> &Str {
        &self.uid
    }

    fn namespace(&self) -> Option<&Str> {
        Some(&self.id.namespace)
    }

    fn store(index: &mut Index) -> &mut Store<Self> {
        &mut index.revisions
    }

    fn upsert(self, index: &mut Index) {
        let rev = self;
        if index.revisions.objects.get(&rev.uid) == Some(&rev) {
            return;
        }
        index.generation += 1;
        Self::remove(index, &rev.uid.clone());
        if let (Some(owner), Some(hash)) = (&rev.owner_uid, &rev.hash) {
            index.revision_by_hash.insert((owner.clone(), hash.clone()), rev.uid.clone());
        }
        index.revisions.objects.insert(rev);
    }

    fn remove(index: &mut Index, uid: &Str) {
        let Some((_, rev)) = index.revisions.objects.remove(uid) else { return };
        index.generation += 1;
        if let (Some(owner), Some(hash)) = (rev.owner_uid, rev.hash) {
            let key = (owner, hash);
            if index.revision_by_hash.get(&key).is_some_and(|u| u == uid) {
                index.revision_by_hash.remove(&key);
            }
        }
    }
}

impl Indexed for ControllerRevision {
    type Compact = Revision;

    fn convert(&self, interner: &mut Interner) -> Result<Revision, ConvertError> {
        convert::revision(self, interner)
    }
}

impl Index {
    pub(super) fn revision_of(&self, ds: &DaemonSet, pod: &Pod) -> Option<&Revision> {
        let key = (ds.uid.clone(), pod.revision_hash()?.clone());
        self.revisions.objects.get(self.revision_by_hash.get(&key)?)
    }
}
