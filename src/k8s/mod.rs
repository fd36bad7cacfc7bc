//! The Kubernetes side of the data: the slim wire shapes the exporter decodes (from JSON by
//! serde, `slim`; from protobuf by prost, `proto`), and their conversion to the model. Pure: the I/O that fetches them is in `source`.

pub mod convert;
pub mod health;
pub mod proto;
pub mod slim;
