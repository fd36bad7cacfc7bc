//! The Kubernetes side of the data: the slim wire shapes the exporter decodes, and their
//! conversion to the model. Pure: the I/O that fetches them is in `source`.

pub mod convert;
pub mod health;
pub mod slim;
