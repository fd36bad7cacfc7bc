//! What the index's views become: the `/metrics` families (`metrics`), the explanation
//! with suggested fixes (`explain`), and the landing page that shows it (`page`).

pub mod explain;
pub mod metrics;
pub mod page;
