//! The watch guarantees as one vocabulary: every checker of them (the simulator's oracle, the
//! harness's checker, the core's model test) names a violation with a [`Guarantee`], so a
//! failure reads the same wherever it is found.
//!
//! The first six are the crate's own guarantees (see the crate docs), named as etcd's robustness
//! tests name them; the others are what a client of the server can check on top of them.

use std::fmt;

/// One guarantee a watch client can check.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Guarantee {
    /// Resource versions never decrease (events and bookmarks); within one revision, the
    /// store's order.
    Ordered,
    /// No event is delivered twice on a connection, across any number of stalls and resyncs.
    Unique,
    /// A revision's selected events are delivered together; no resume point (position,
    /// bookmark, 410) falls inside a revision.
    Atomic,
    /// Every selected event from the watch's start until its end, with no gap.
    Reliable,
    /// A watch from the last resource version seen continues exactly where the old one stopped.
    Resumable,
    /// A bookmark at `rv` comes only after every selected event `<= rv`, never moves a client
    /// backwards, and resuming from it loses nothing.
    Bookmarkable,
    /// The initial events (a list or a streaming list) are exactly the selected objects at the
    /// revision of the initial state, each once, at the right version.
    InitialState,
    /// Each event is typed as its selection implies (ADDED on entering, DELETED on leaving,
    /// MODIFIED otherwise) and carries the objects the selection implies.
    Selection,
    /// A 410 only when the position really aged out of the history, and after the backlog.
    Honest410,
    /// A consistent read equals the state at a revision inside its real-time window.
    LinearizableReads,
    /// Every acknowledged write is in the committed history.
    Durable,
}

impl Guarantee {
    /// Every guarantee, in the order above.
    pub const ALL: [Guarantee; 11] = [
        Guarantee::Ordered,
        Guarantee::Unique,
        Guarantee::Atomic,
        Guarantee::Reliable,
        Guarantee::Resumable,
        Guarantee::Bookmarkable,
        Guarantee::InitialState,
        Guarantee::Selection,
        Guarantee::Honest410,
        Guarantee::LinearizableReads,
        Guarantee::Durable,
    ];

    /// The name used in messages and reports.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Guarantee::Ordered => "Ordered",
            Guarantee::Unique => "Unique",
            Guarantee::Atomic => "Atomic",
            Guarantee::Reliable => "Reliable",
            Guarantee::Resumable => "Resumable",
            Guarantee::Bookmarkable => "Bookmarkable",
            Guarantee::InitialState => "Initial state",
            Guarantee::Selection => "Selection",
            Guarantee::Honest410 => "Honest 410",
            Guarantee::LinearizableReads => "Linearizable reads",
            Guarantee::Durable => "Durable",
        }
    }
}

impl fmt::Display for Guarantee {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_distinct_and_displayed() {
        let names: std::collections::BTreeSet<_> =
            Guarantee::ALL.iter().map(|g| g.to_string()).collect();
        assert_eq!(names.len(), Guarantee::ALL.len());
        assert_eq!(Guarantee::Honest410.to_string(), "Honest 410");
    }
}
