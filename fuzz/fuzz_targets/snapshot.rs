//! Any bytes as a snapshot file: parse, load into the index, render /metrics.
//! Errors are expected; panics are bugs.
#![no_main]

use std::path::Path;
use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use misschedule_exporter::index::Index;
use misschedule_exporter::report::metrics::Exposition;
use misschedule_exporter::shared::Shared;
use misschedule_exporter::source::snapshot::Snapshot;

fuzz_target!(|data: &[u8]| {
    let mut snapshot = Snapshot::default();
    if snapshot.add_bytes(Path::new("fuzz.json"), data).is_err() {
        return;
    }
    let mut index = Index::default();
    if snapshot.load_into(&mut index, &[]).is_err() {
        return;
    }
    let text =
        Exposition::new(Arc::new(Shared::new(index)), Default::default()).render().expect("rendering never fails");
    assert!(text.ends_with("# EOF\n"));
});
