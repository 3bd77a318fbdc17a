//! Integration tests: the built binary, driven end to end.

mod cli;
mod faults;
mod loading;
mod maintain;
mod peers;
mod samples;
mod security;
mod util;
