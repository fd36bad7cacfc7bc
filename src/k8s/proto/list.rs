//! What every list page says besides its items: its resourceVersion, and where the next
//! page starts.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ListMeta;
use kube::api::{ObjectList, TypeMeta};
use prost::Message;

use super::non_empty;

#[derive(Clone, PartialEq, Message)]
pub(super) struct WireListMeta {
    #[prost(string, optional, tag = "2")]
    resource_version: Option<String>,
    #[prost(string, optional, tag = "3")]
    continue_: Option<String>,
    #[prost(int64, optional, tag = "4")]
    remaining_item_count: Option<i64>,
}

/// A core v1 list of `kind`, as the JSON wire's would read.
pub(super) fn object_list<T: Clone>(kind: &str, meta: Option<WireListMeta>, items: Vec<T>) -> ObjectList<T> {
    let meta = meta.unwrap_or_default();
    ObjectList {
        types: TypeMeta { api_version: "v1".into(), kind: kind.into() },
        metadata: ListMeta {
            resource_version: non_empty(meta.resource_version),
            continue_: non_empty(meta.continue_),
            remaining_item_count: meta.remaining_item_count,
            self_link: None,
        },
        items,
    }
}
