//! What the index's views become: the `/metrics` families (`metrics`) in either text format
//! (`format`), gzip-compressed in cached pieces (`gzip`), the explanation with suggested
//! fixes (`explain`), the ways it prints (`text`), the landing page that shows it (`page`, made
//! of `html`), and what each answer looked at (`scope`).

pub mod explain;
pub mod fix;
pub mod format;
pub mod gzip;
pub mod html;
pub mod metrics;
pub mod page;
pub mod scope;
pub mod text;
