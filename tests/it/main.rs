//! Integration tests: the built binary, driven end to end.

mod adapters;
mod attach;
mod cli;
mod concurrency;
mod faults;
mod fork;
mod golden;
mod history;
mod html;
mod kill_storm;
mod loading;
mod maintain;
mod otel;
mod page;
mod peers;
mod process_tree;
mod replay;
mod respawn;
mod samples;
mod security;
mod serve;
mod storage;
mod terminals;
mod util;
mod v2;
mod watch;
