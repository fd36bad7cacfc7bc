//! What the index's views become: the `/metrics` families (`metrics`) and `explain` rows
//! with suggested fixes (`explain`).

pub mod explain;
pub mod metrics;
