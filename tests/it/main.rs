//! Integration tests: the built binary, driven end to end.

mod cli;
mod faults;
mod golden;
mod html;
mod loading;
mod maintain;
mod peers;
mod replay;
mod samples;
mod util;
