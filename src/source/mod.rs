//! Where the index's events come from: live watches of the API server (`watch`, after
//! `connect`), one list of everything (`list`, for one-shot answers), or snapshot files.
//! `retry` decides when a failed watch relists.

pub mod connect;
pub mod list;
pub mod retry;
pub mod snapshot;
pub mod watch;
