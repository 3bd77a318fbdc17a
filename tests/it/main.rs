//! Integration tests: the built binary, driven end to end.

mod cli;
mod faults;
mod peers;
mod util;
