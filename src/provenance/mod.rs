//! Which session wrote a line: the edits a session's journal shows (`edits`), lines as
//! fingerprints (`lines`), and the rules that give a committed line to the agent edit that
//! wrote it or to the person git names (`attribute`). Pure (no git, no files) but for `repo`,
//! the work tree a path lies in and its identity, through the git binary.

pub mod attribute;
pub mod edits;
pub mod lines;
pub mod note;
pub mod patch;
pub mod porcelain;
pub mod repo;
