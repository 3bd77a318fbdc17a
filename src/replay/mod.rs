//! Recordings turned into bug reports: read as exchanges ([`recording`]), played to a real
//! client as the agent ([`player`]), compared ([`diff`], with [`matching`] ignoring what changes
//! between runs), packed into one shareable file ([`bundle`]), and copied into a new session cut
//! at a turn ([`fork`]).

pub mod bundle;
pub mod diff;
pub mod fork;
pub mod matching;
pub mod player;
pub mod recording;

pub use recording::Recording;

#[cfg(test)]
mod tests;
