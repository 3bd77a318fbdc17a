//! Recordings turned into bug reports: read as exchanges ([`recording`]), played to a real
//! client as the agent ([`player`]), compared ([`diff`], with [`matching`] ignoring what changes
//! between runs), and packed into one shareable file ([`bundle`]).

pub mod bundle;
pub mod diff;
pub mod matching;
pub mod player;
pub mod recording;

pub use recording::Recording;

#[cfg(test)]
mod tests;
