//! Integration tests: the built binary, driven end to end.

mod cli;
mod concurrency;
mod faults;
mod kill_storm;
mod loading;
mod maintain;
mod peers;
mod samples;
mod storage;
mod util;
