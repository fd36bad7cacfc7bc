//! The one clock the exporter reads. The index never reads it: callers stamp it
//! (`Index::set_now`), so tests own time.

use crate::model::Timestamp;

/// Unix time in milliseconds.
pub fn unix_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

/// Unix time in seconds, as the index stamps transitions.
pub fn unix_now() -> Timestamp {
    unix_ms() / 1000
}
