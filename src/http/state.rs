//! What every handler reads: the shared index and readiness, the cached exposition, and
//! the limit on renders at once.

use std::sync::Arc;

use tokio::sync::Semaphore;

use crate::report::metrics::Exposition;
use crate::report::scope::Origin;
use crate::shared::Shared;

#[derive(Clone)]
pub(crate) struct AppState {
    pub(crate) shared: Arc<Shared>,
    pub(crate) exposition: Arc<Exposition>,
    /// Renders at once, one per core: more buys no speed, and each blocking thread keeps
    /// its own stack and allocator cache (measured in docs/benchmarks.md).
    pub(crate) renderers: Arc<Semaphore>,
    /// What the index was read from, named in every answer.
    pub(crate) origin: Arc<Origin>,
}

impl AppState {
    pub(crate) fn new(shared: Arc<Shared>, exposition: Arc<Exposition>, origin: Origin) -> Self {
        let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
        Self { shared, exposition, renderers: Arc::new(Semaphore::new(threads)), origin: Arc::new(origin) }
    }
}
