//! The session tree: child sessions (subagents) a parent announces. A child has its own
//! session ID, its updates arrive under it, and no `session/new` ever opened it; it is its
//! parent's, not a session of its own: its lines go to the journal of the root of its tree
//! (FORMAT.md), to the connections attached to that root, and count as that root's activity.
//!
//! A child is announced on its parent by a `subagent_update` (or AIR's `subagent_spawned`)
//! naming it (see [`crate::acp::subagents`]), before any of its own lines. Only an ID the
//! table holds no session under can become a child, so the tree has no cycle; an ID announced
//! again keeps its first parent; its root is found once, when it is announced. Bounded: past [`TREE_LIMIT`] children in a run, further ones
//! are sessions of their own, as every ID nobody announced is.

use super::vocab::{HashMap, SessionId};

/// The most children a run keeps in its tree.
pub(super) const TREE_LIMIT: usize = 65_536;

/// The child sessions announced in this run, by client-facing ID.
#[derive(Debug, Default)]
pub(super) struct SessionTree {
    /// Child → the root of its tree (the session a chain of announcements starts from, found
    /// once, when the child is announced).
    root: HashMap<SessionId, SessionId>,
}

impl SessionTree {
    /// `s` is a child session.
    pub(super) fn is_child(&self, s: &str) -> bool {
        self.root.contains_key(s)
    }

    /// The root of `s`'s tree, when `s` is a child.
    pub(super) fn root_of(&self, s: &str) -> Option<&SessionId> {
        self.root.get(s)
    }

    /// `parent` announced `child`, an ID no session of the table has: true when it is new to
    /// the tree (and the tree had room).
    pub(super) fn announce(&mut self, parent: &SessionId, child: &str) -> bool {
        if self.root.contains_key(child) || self.root.len() >= TREE_LIMIT || **parent == *child {
            return false;
        }
        let root = self.root.get(parent).unwrap_or(parent).clone();
        self.root.insert(SessionId::from(child), root);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_grandchild_belongs_to_the_root_and_an_id_keeps_its_first_parent() {
        let mut tree = SessionTree::default();
        let root = SessionId::from("root");
        assert!(tree.announce(&root, "c1"));
        assert!(tree.announce(&SessionId::from("c1"), "g1"));
        assert!(
            !tree.announce(&SessionId::from("other"), "c1"),
            "c1 is root's"
        );
        assert!(!tree.announce(&root, "root"), "no session is its own child");
        assert_eq!(tree.root_of("g1").map(|s| &**s), Some("root"));
        assert_eq!(tree.root_of("c1").map(|s| &**s), Some("root"));
        assert_eq!(tree.root_of("root"), None);
        assert!(tree.is_child("g1") && !tree.is_child("root"));
    }

    #[test]
    fn past_its_bound_the_tree_takes_no_more_children() {
        let mut tree = SessionTree::default();
        let root = SessionId::from("root");
        for n in 0..TREE_LIMIT {
            assert!(tree.announce(&root, &format!("c{n}")));
        }
        assert!(!tree.announce(&root, "one-more"));
        assert!(!tree.is_child("one-more"));
    }
}
