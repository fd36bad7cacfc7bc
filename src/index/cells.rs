//! A DaemonSet's cells, one per node number: which of its per-node tables have an entry for
//! the node, and the pod it claims there.

use super::keyed::Slot;
use super::node_ids::NodeId;

/// The tables that share a DaemonSet's cells: a bit each.
#[derive(Clone, Copy, Debug)]
pub(super) enum Table {
    Skips = 1,
    /// The entries of `Skips` that are misscheduled: read through this bit, the skips are the
    /// misscheduled nodes (`daemonset_state::Misscheduled`).
    Misscheduled = 2,
    Uncovered = 4,
}

/// A `u32` per node number. Its top three bits are the `Table`s with an entry for the node,
/// the rest its claim: 0 none, 1 several (`claimed::Several` holds them), `n + 2` the one
/// pod in slot `n`. A node event reads its node's cell in every DaemonSet, at 65,000 nodes
/// a line from memory each, where a byte of flags and a 4-byte claim in two columns were two
/// lines (their prefetches overlapped, so no time showed) and 5 bytes per node.
#[derive(Debug, Default)]
pub(super) struct Cells(Vec<u32>);

const TABLE_SHIFT: u32 = 29;
const CLAIM_MASK: u32 = (1 << TABLE_SHIFT) - 1;
const NONE: u32 = 0;
const SEVERAL: u32 = 1;

/// What a cell says of the pods claimed on its node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Claim {
    None,
    /// Two pods or more, or one whose slot is past what a cell holds (half a billion).
    Several,
    One(Slot),
}

impl Claim {
    /// The claim's bits, if a cell holds them.
    fn bits(self) -> Option<u32> {
        match self {
            Self::None => Some(NONE),
            Self::Several => Some(SEVERAL),
            Self::One(slot) => u32::try_from(slot.index()).ok()?.checked_add(2).filter(|&bits| bits <= CLAIM_MASK),
        }
    }

    fn of(cell: u32) -> Self {
        match cell & CLAIM_MASK {
            NONE => Self::None,
            SEVERAL => Self::Several,
            bits => Self::One(Slot::at(bits - 2)),
        }
    }
}

fn bit(table: Table) -> u32 {
    (table as u32) << TABLE_SHIFT
}

impl Cells {
    /// Whether the node numbered `id` has an entry in `table`; a node without a number has none.
    pub(super) fn has(&self, id: Option<NodeId>, table: Table) -> bool {
        id.and_then(|id| self.0.get(id.index())).is_some_and(|cell| cell & bit(table) != 0)
    }

    /// Sets or clears `table`'s bit of the node numbered `id`, growing the column to reach it.
    pub(super) fn set(&mut self, id: NodeId, table: Table, on: bool) {
        if id.index() >= self.0.len() && !on {
            return;
        }
        let cell = self.cell_mut(id, 0);
        if on {
            *cell |= bit(table);
        } else {
            *cell &= !bit(table);
        }
    }

    /// Clears `table`'s bit of every node.
    pub(super) fn clear(&mut self, table: Table) {
        self.0.iter_mut().for_each(|cell| *cell &= !bit(table));
    }

    /// The claim of the node numbered `id`.
    pub(super) fn claim(&self, id: NodeId) -> Claim {
        self.0.get(id.index()).map_or(Claim::None, |&cell| Claim::of(cell))
    }

    /// Gives the node numbered `id` `claim`, in a cluster whose node numbers are below `bound`;
    /// returns false, and changes nothing, if a cell cannot hold it.
    #[must_use]
    pub(super) fn set_claim(&mut self, id: NodeId, claim: Claim, bound: usize) -> bool {
        let Some(bits) = claim.bits() else { return false };
        if id.index() >= self.0.len() && claim == Claim::None {
            return true;
        }
        let cell = self.cell_mut(id, bound);
        *cell = (*cell & !CLAIM_MASK) | bits;
        true
    }

    /// Takes every node's claim away.
    pub(super) fn clear_claims(&mut self) {
        self.0.iter_mut().for_each(|cell| *cell &= !CLAIM_MASK);
    }

    /// The nodes with a claim, by number.
    pub(super) fn claimed(&self) -> impl Iterator<Item = (NodeId, Claim)> {
        let claims = self.0.iter().enumerate().filter(|&(_, &cell)| cell & CLAIM_MASK != NONE);
        claims.map(|(at, &cell)| (NodeId::at(at), Claim::of(cell)))
    }

    /// Asks for the cell of the node numbered `id` (`prefetch`).
    pub(super) fn prefetch(&self, id: NodeId) {
        if let Some(cell) = self.0.get(id.index()) {
            super::prefetch::prefetch(cell);
        }
    }

    /// The bytes of the column (`footprint`).
    pub(super) fn bytes(&self) -> usize {
        self.0.capacity() * size_of::<u32>()
    }

    /// The cell of the node numbered `id`, growing the column to every node numbered below
    /// `bound` at once. Room grows by a quarter at least, so that a list that numbers nodes
    /// one by one does not copy the column each time; but only the cells up to `id` or
    /// `bound` are written, and the rest of the room stays untouched, out of the RSS (a node
    /// list sets the bits, and grows the column, before any pod is claimed).
    fn cell_mut(&mut self, id: NodeId, bound: usize) -> &mut u32 {
        let (at, len) = (id.index(), self.0.len());
        if at >= len {
            let want = bound.max(at + 1);
            self.0.reserve_exact(want.max(len + len / 4 + 16) - len);
            self.0.resize(want, 0);
        }
        &mut self.0[at]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cells_tables_and_claim_are_apart() {
        let (id, other) = (NodeId::at(7), NodeId::at(2));
        let mut cells = Cells::default();
        assert!(cells.set_claim(id, Claim::One(Slot::at(0)), 10));
        cells.set(id, Table::Skips, true);
        cells.set(id, Table::Uncovered, true);
        assert!(cells.set_claim(other, Claim::Several, 10));
        assert_eq!((cells.claim(id), cells.claim(other)), (Claim::One(Slot::at(0)), Claim::Several));
        assert!(cells.has(Some(id), Table::Skips) && !cells.has(Some(id), Table::Misscheduled));
        assert!(cells.has(Some(id), Table::Uncovered) && !cells.has(Some(other), Table::Skips));

        let last = Slot::at(CLAIM_MASK - 2);
        assert!(cells.set_claim(id, Claim::One(last), 10));
        assert_eq!(cells.claim(id), Claim::One(last), "the highest slot a cell holds");
        assert!(cells.has(Some(id), Table::Skips) && cells.has(Some(id), Table::Uncovered), "the bits stay");
        assert!(!cells.set_claim(id, Claim::One(Slot::at(CLAIM_MASK - 1)), 10), "one past it");
        assert_eq!(cells.claim(id), Claim::One(last), "a claim a cell cannot hold changes nothing");

        cells.clear(Table::Skips);
        assert!(!cells.has(Some(id), Table::Skips) && cells.has(Some(id), Table::Uncovered));
        assert_eq!(cells.claimed().collect::<Vec<_>>(), [(other, Claim::Several), (id, Claim::One(last))]);
        cells.clear_claims();
        assert_eq!((cells.claimed().count(), cells.claim(id)), (0, Claim::None));
        assert!(cells.has(Some(id), Table::Uncovered), "clearing the claims keeps the bits");
        let (far, bytes) = (NodeId::at(1000), cells.bytes());
        assert!(!cells.has(Some(far), Table::Uncovered) && cells.claim(far) == Claim::None);
        cells.set(far, Table::Uncovered, false);
        assert!(cells.set_claim(far, Claim::None, 10));
        assert_eq!(cells.bytes(), bytes, "clearing past the column does not grow it");
    }

    /// Room grows ahead, but only the cells asked for are written: the rest stays out of the RSS.
    #[test]
    fn the_column_is_written_only_as_far_as_asked() {
        let mut cells = Cells::default();
        cells.set(NodeId::at(9), Table::Skips, true);
        assert_eq!((cells.0.len(), cells.0.capacity()), (10, 16), "room for 16, 10 written");
        assert!(cells.set_claim(NodeId::at(3), Claim::One(Slot::at(1)), 40));
        assert_eq!(cells.0.len(), 10, "a claim within the column writes no more");
        assert!(cells.set_claim(NodeId::at(12), Claim::One(Slot::at(1)), 40));
        assert_eq!(cells.0.len(), 40, "a claim past it, to every node numbered at once");
        assert!(cells.has(Some(NodeId::at(9)), Table::Skips) && cells.claim(NodeId::at(39)) == Claim::None);
    }
}
