//! How one watch call ended and what comes next, and when silence means a dead connection.
//! Pure: every fault the API server or a proxy can cause is a row in a table test.
//!
//! A watch call that ends is normal (the server ends it at its timeout). One that ends
//! without progress is not: a proxy that cuts each response at the same byte would
//! otherwise be re-watched at once, forever.

use std::time::Duration;

use crate::source::retry::doubled;
pub use crate::telemetry::WatchFailure as Failure;

/// How a watch call's stream ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    /// The server closed the stream at a line boundary.
    Closed,
    /// A 410 Gone: the resourceVersion it resumed from was compacted away.
    Expired,
    Failed(Failure),
}

/// What a watch call did before it ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Call {
    /// From the request to the end of the stream.
    pub lasted: Duration,
    /// It received at least one event or bookmark: its resourceVersion moved on.
    pub progressed: bool,
}

/// A close this long before the call's timeout is still the server's timeout: its clock
/// and ours start a round trip apart.
const TIMEOUT_SLACK: Duration = Duration::from_secs(2);
/// A call that ended sooner than this is resumed only after this long, even with
/// progress: a stream cut after one event each time is bounded to one call a second...
pub const MIN_CALL: Duration = Duration::from_secs(1);
/// ...and such closes in a row double it, up to the retry's cap. A call that lasted this
/// long was no such close, and ends the run.
pub const SHORT_CALL: Duration = Duration::from_secs(10);

/// What to do after a watch call ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// Watch again from the last resourceVersion, after this pause (zero after a normal end).
    Resume(Duration),
    /// Relist after `Retry::after_expiry`.
    Relist,
    /// Relist after `Retry::after_failure`, counted and logged.
    Fail(Failure),
}

/// The rule: a close at the timeout, or after progress, resumes; a close before the
/// timeout with nothing received is a failure (`EndedEarly`), as is every error.
/// `short_before`: how many calls in a row before this one closed short (`is_short`).
pub fn after_call(call: Call, end: End, timeout: Duration, short_before: u32) -> Next {
    match end {
        End::Expired => Next::Relist,
        End::Failed(failure) => Next::Fail(failure),
        End::Closed if !call.progressed && call.lasted + TIMEOUT_SLACK < timeout => Next::Fail(Failure::EndedEarly),
        End::Closed if call.lasted < SHORT_CALL => {
            Next::Resume(doubled(MIN_CALL, short_before).saturating_sub(call.lasted))
        }
        End::Closed => Next::Resume(Duration::ZERO),
    }
}

/// The call closed short of `SHORT_CALL`: counted towards the next one's pause.
pub fn is_short(call: Call, end: End) -> bool {
    end == End::Closed && call.lasted < SHORT_CALL
}

/// How long a watch may stay silent before it counts as stalled, and when it nudges.
///
/// API servers since about 1.27 send a watch that asks a bookmark each minute, on top of
/// the one just before the call's deadline; older ones send only that last one. So a watch
/// uses the short limit (default 90 s: a minute's bookmark, plus half) once it has seen a
/// bookmark well before a deadline, and until then the call's own timeout plus a grace,
/// which is what kube-runtime's watcher allows any server.
///
/// The minute's bookmark comes only when the server has a resourceVersion newer than the
/// watch's (apiserver `cacheWatcher.process`), and its watch cache learns one from a change
/// to that resource or from a progress notification, which etcd sends every 10 minutes or
/// when a consistent read asks. Of a resource nobody writes, the watch would hear nothing:
/// so a silent watch nudges the server (`nudge_every`, `watch::nudge`) with such a read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Silence {
    stall_after: Duration,
    timeout: Duration,
    periodic_bookmarks: bool,
}

/// Beyond the call's timeout, how long a server that sends no periodic bookmarks may take
/// to close it.
pub const DEADLINE_GRACE: Duration = Duration::from_secs(5);
/// A bookmark this long before the call's deadline is a periodic one, not the deadline's.
const PERIODIC_MARGIN: Duration = Duration::from_secs(10);
/// The shortest silence that earns a nudge.
const NUDGE_FLOOR: Duration = Duration::from_secs(15);

impl Silence {
    pub fn new(stall_after: Duration, timeout: Duration) -> Self {
        Self { stall_after, timeout, periodic_bookmarks: false }
    }

    /// A bookmark arrived `into_call` after the call started.
    pub fn bookmark(&mut self, into_call: Duration) {
        if into_call + PERIODIC_MARGIN < self.timeout {
            self.periodic_bookmarks = true;
        }
    }

    /// Silence after which a watch nudges the server, and again after each nudge: a
    /// quarter of the short limit, so that the nudge lands before the server's next
    /// minute's bookmark is due while the limit still runs. Never below `NUDGE_FLOOR`:
    /// with a limit that short (tests), bookmarks cannot keep a watch alive anyway.
    pub fn nudge_every(&self) -> Duration {
        (self.stall_after / 4).max(NUDGE_FLOOR)
    }

    /// The longest silence allowed now.
    pub fn limit(&self) -> Duration {
        let deadline = self.timeout + DEADLINE_GRACE;
        if self.periodic_bookmarks { self.stall_after.min(deadline) } else { deadline }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TIMEOUT: Duration = Duration::from_secs(290);

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    fn call(lasted: Duration, progressed: bool) -> Call {
        Call { lasted, progressed }
    }

    #[test]
    fn every_way_a_call_ends() {
        let rows = [
            // (what happened, call, end, next)
            ("server timeout", call(secs(290), false), End::Closed, Next::Resume(Duration::ZERO)),
            ("timeout, a round trip early", call(secs(289), false), End::Closed, Next::Resume(Duration::ZERO)),
            ("proxy idle cut after events", call(secs(60), true), End::Closed, Next::Resume(Duration::ZERO)),
            ("closed at once, nothing sent", call(Duration::ZERO, false), End::Closed, Next::Fail(Failure::EndedEarly)),
            ("closed early, nothing sent", call(secs(100), false), End::Closed, Next::Fail(Failure::EndedEarly)),
            (
                "one event then closed at once",
                call(Duration::from_millis(5), true),
                End::Closed,
                Next::Resume(Duration::from_millis(995)),
            ),
            ("410", call(secs(3), true), End::Expired, Next::Relist),
            ("cut mid-line", call(secs(3), true), End::Failed(Failure::Cut), Next::Fail(Failure::Cut)),
            ("stalled", call(secs(90), true), End::Failed(Failure::Stalled), Next::Fail(Failure::Stalled)),
        ];
        for (what, call, end, next) in rows {
            assert_eq!(after_call(call, end, TIMEOUT, 0), next, "{what}");
        }
    }

    #[test]
    fn short_closes_in_a_row_double_the_pause_up_to_the_cap() {
        let quick = call(Duration::from_millis(5), true);
        let pauses: Vec<Duration> = (0..8)
            .map(|before| match after_call(quick, End::Closed, TIMEOUT, before) {
                Next::Resume(pause) => pause + quick.lasted,
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(pauses, [1, 2, 4, 8, 16, 30, 30, 30].map(secs));
        // A call that lasted is no short close: resumed at once, and the run ends.
        let long = call(SHORT_CALL, true);
        assert_eq!(after_call(long, End::Closed, TIMEOUT, 5), Next::Resume(Duration::ZERO));
        assert!(is_short(quick, End::Closed) && !is_short(long, End::Closed));
        assert!(!is_short(quick, End::Failed(Failure::Cut)));
    }

    #[test]
    fn a_resume_never_comes_sooner_than_a_second_after_the_last_call_started() {
        for ms in [0, 1, 500, 999, 1000, 5000] {
            let lasted = Duration::from_millis(ms);
            let Next::Resume(pause) = after_call(call(lasted, true), End::Closed, TIMEOUT, 0) else { panic!("{ms}") };
            assert!(lasted + pause >= MIN_CALL, "{ms} ms");
        }
    }

    #[test]
    fn silence_is_a_stall_at_the_short_limit_only_where_bookmarks_are_periodic() {
        let mut silence = Silence::new(secs(90), TIMEOUT);
        // Before 1.27 the only bookmark comes just before the deadline.
        assert_eq!(silence.limit(), secs(295));
        silence.bookmark(secs(288));
        assert_eq!(silence.limit(), secs(295), "the deadline's bookmark proves nothing");
        // A bookmark a minute into the call is periodic.
        silence.bookmark(secs(60));
        assert_eq!(silence.limit(), secs(90));
        // Never beyond what the call's own timeout allows.
        let mut short = Silence::new(secs(90), secs(30));
        short.bookmark(secs(5));
        assert_eq!(short.limit(), secs(35));
    }

    #[test]
    fn a_silent_watch_nudges_before_the_servers_next_minute_bookmark_is_due() {
        let silence = Silence::new(secs(90), TIMEOUT);
        // Bookmarks are tried each minute: a nudge made in the first quarter of the limit
        // is in time for the next try within it (22.5 + 60 < 90).
        assert_eq!(silence.nudge_every(), Duration::from_millis(22_500));
        assert!(silence.nudge_every() + secs(60) < silence.stall_after);
        // With a 3 s limit (the fault tests) a watch never waits long enough to nudge.
        assert!(Silence::new(secs(3), TIMEOUT).nudge_every() > secs(3));
    }
}
