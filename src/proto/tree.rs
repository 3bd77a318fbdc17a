//! The session tree: child sessions (subagents) a parent announces. A child has its own
//! session ID, its updates arrive under it, and no `session/new` ever opened it; it is its
//! parent's, not a session of its own: its lines go to the journal of the root of its tree
//! (FORMAT.md), to the connections attached to that root, and count as that root's activity.
//!
//! A child is announced on its parent by a `subagent_update` (or AIR's `subagent_spawned`)
//! naming it (see [`crate::acp::subagents`]), before any of its own lines. Only an ID the
//! table holds no session under can become a child, so the tree has no cycle; an ID announced
//! again keeps its first parent; its root is found once, when it is announced. Bounded: past
//! [`TREE_LIMIT`] children in a run, further ones are sessions of their own, as every ID nobody
//! announced is.
//!
//! The tree is kept in the session table ([`super::sessions`]): a child is the table's entry for
//! its ID, whose [`super::sessions::Session`] holds the root of its tree
//! (`SessionTable::announce_child`, `owner`, `root_of`). A child's entry is made
//! with nothing but its root (not live, no journal, no connections: its lines are its root's),
//! so what goes over the table's sessions passes it by.

/// The most children a run keeps in its tree.
pub(super) const TREE_LIMIT: usize = 65_536;

#[cfg(test)]
mod tests {
    use super::super::sessions::SessionTable;
    use super::super::vocab::SessionId;
    use super::*;

    #[test]
    fn a_grandchild_belongs_to_the_root_and_an_id_keeps_its_first_parent() {
        let mut tree = SessionTable::default();
        let root = SessionId::from("root");
        assert!(tree.announce_child(&root, "c1").is_some());
        assert!(tree.announce_child(&SessionId::from("c1"), "g1").is_some());
        assert!(
            tree.announce_child(&SessionId::from("other"), "c1")
                .is_none(),
            "c1 is root's"
        );
        assert!(
            tree.announce_child(&root, "root").is_none(),
            "no session is its own child"
        );
        assert_eq!(tree.root_of("g1").map(|s| &**s), Some("root"));
        assert_eq!(tree.root_of("c1").map(|s| &**s), Some("root"));
        assert_eq!(tree.root_of("root"), None);
        assert!(tree.root_of("g1").is_some() && tree.root_of("root").is_none());
    }

    #[test]
    fn past_its_bound_the_tree_takes_no_more_children() {
        let mut tree = SessionTable::default();
        let root = SessionId::from("root");
        for n in 0..TREE_LIMIT {
            assert!(tree.announce_child(&root, &format!("c{n}")).is_some());
        }
        assert!(tree.announce_child(&root, "one-more").is_none());
        assert!(tree.root_of("one-more").is_none());
    }
}
