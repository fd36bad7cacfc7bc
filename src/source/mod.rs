//! Where the index's events come from: live watches of the API server (`watch`, after
//! `connect`), one list of everything (`list`, for one-shot answers), or snapshot files.
//! `request` sends a watch's calls, `decode` reads what they bring, `call_error` says how
//! one failed, `stream_list` reads a list streamed as a watch's first events, `progress`
//! judges how each call ended and when silence is a stall, and `retry` decides when a failed
//! watch relists; `advice` says what an API server's refusal asks for.
//! `failed_creates` watches the controller's `FailedCreate` Events beside them.

pub mod advice;
mod burst;
pub mod call_error;
pub mod connect;
pub mod decode;
pub mod failed_creates;
mod lines;
pub mod list;
pub mod manifest;
pub mod progress;
pub mod request;
pub mod retry;
pub mod snapshot;
pub mod stream_list;
pub mod watch;
