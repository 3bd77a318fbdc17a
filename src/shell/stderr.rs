//! [`StderrCopy`]: the agent's stderr copied to ours on a thread of its own.

use std::io::Write;

use bytes::Bytes;

/// Copies the agent's stderr to ours on its own thread, so an editor that does not drain our
/// stderr never stalls the relay (chunks are dropped while that thread is behind).
pub(super) struct StderrCopy(std::sync::mpsc::SyncSender<Bytes>);

impl StderrCopy {
    pub(super) fn spawn() -> StderrCopy {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Bytes>(256);
        std::thread::Builder::new()
            .name("stderr".into())
            .spawn(move || {
                let mut err = std::io::stderr();
                for chunk in rx {
                    let _ = err.write_all(&chunk);
                }
            })
            .expect("spawning the stderr thread");
        StderrCopy(tx)
    }

    pub(super) fn pass(&self, chunk: Bytes) {
        let _ = self.0.try_send(chunk);
    }
}
