//! What the index's views become: the `/metrics` families (`metrics`) in either text format
//! (`format`), gzip-compressed in cached pieces (`gzip`), the explanation with suggested
//! fixes and the ways it prints (`explain`), and the landing page that shows it (`page`).

pub mod explain;
pub mod format;
pub mod gzip;
pub mod metrics;
pub mod page;
