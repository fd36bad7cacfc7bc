//! One look at the index: the Events it calls for, from the notices it holds now
//! (`notice::current`), what was told before (`transitions`) and what cannot be trusted
//! yet (`settle`). Pure: the publisher (`publish::events`) looks on each new generation and
//! when `next_look_ms` says, and sends what a look returns.

use super::notice::{self, Notice};
use super::settle::Settle;
use super::transitions::Transitions;
use crate::index::Index;

/// What the publisher keeps from one look to the next.
#[derive(Debug, Default)]
pub struct Looks {
    pub transitions: Transitions,
    settle: Settle,
}

/// What one look found to tell.
#[derive(Debug, Default)]
pub struct Look {
    /// Subjects told before that recovered, oldest news first.
    pub recoveries: Vec<Notice>,
    /// Notices whose verdict is new, to tell now.
    pub changed: Vec<Notice>,
}

impl Looks {
    pub fn look(&mut self, index: &Index, now_ms: i64) -> Look {
        let notices = notice::current(index);
        let gone = self.transitions.retain_current(&notices, now_ms);
        let recoveries = self.settle.recoveries(gone, &notices, now_ms, |n| n.recovered_in(index));
        self.settle.track(&notices, now_ms);
        let changed = self.transitions.changed(&notices).into_iter().filter(|n| !self.settle.holds(n, now_ms));
        Look { recoveries, changed: changed.cloned().collect() }
    }

    /// When to look again if the index does not change first (unix ms).
    pub fn next_look_ms(&self, now_ms: i64) -> Option<i64> {
        self.settle.next_look_ms(now_ms)
    }
}
