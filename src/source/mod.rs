//! Where the index's events come from: live watches of the API server, or snapshot files.

pub mod snapshot;
pub mod watch;
