//! The little of Linux inotify that `watch` needs, on raw `libc` calls: watch directories, and
//! wait (with a timeout) until something in them changes.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};

/// A file in a watched directory was written to.
pub(super) const MODIFIED: u32 = libc::IN_MODIFY | libc::IN_CLOSE_WRITE;
/// An entry appeared in a watched directory (made, linked or moved in).
pub(super) const CREATED: u32 = libc::IN_CREATE | libc::IN_MOVED_TO;

/// One change: the directory it happened in and what happened (`CREATED`, `MODIFIED` bits). An
/// empty `dir` means events were lost (the queue overflowed): look at every directory again.
pub(super) struct Change {
    pub(super) dir: PathBuf,
    pub(super) mask: u32,
}

/// An inotify instance and the directories it watches.
pub(super) struct Inotify {
    fd: OwnedFd,
    dirs: std::collections::HashMap<i32, PathBuf>,
    buf: Vec<u8>,
}

impl Inotify {
    pub(super) fn new() -> io::Result<Inotify> {
        // SAFETY: a plain syscall; the descriptor is owned from here on.
        let fd = unsafe { libc::inotify_init1(libc::IN_CLOEXEC | libc::IN_NONBLOCK) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Inotify {
            // SAFETY: `fd` is a new descriptor that nothing else owns.
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
            dirs: std::collections::HashMap::new(),
            buf: vec![0; 64 * 1024],
        })
    }

    /// Watch `dir` for entries created in it and files in it written to.
    pub(super) fn watch(&mut self, dir: &Path) -> io::Result<()> {
        use std::os::unix::ffi::OsStrExt;
        let mut name = dir.as_os_str().as_bytes().to_vec();
        name.push(0);
        // SAFETY: `name` is NUL-terminated and outlives the call.
        let wd = unsafe {
            libc::inotify_add_watch(
                self.fd.as_raw_fd(),
                name.as_ptr().cast(),
                MODIFIED | CREATED | libc::IN_ONLYDIR,
            )
        };
        if wd < 0 {
            return Err(io::Error::last_os_error());
        }
        self.dirs.insert(wd, dir.to_path_buf());
        Ok(())
    }

    /// Wait until something changes or `timeout_ms` pass; returns the changes (none on a
    /// timeout). Events queued meanwhile are all taken.
    pub(super) fn wait(&mut self, timeout_ms: i32) -> io::Result<Vec<Change>> {
        let mut poll = libc::pollfd {
            fd: self.fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        let n = unsafe { libc::poll(&mut poll, 1, timeout_ms) };
        if n < 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::Interrupted {
                Ok(Vec::new())
            } else {
                Err(e)
            };
        }
        let mut changes = Vec::new();
        loop {
            // SAFETY: reads into our buffer, within its length.
            let got = unsafe {
                libc::read(
                    self.fd.as_raw_fd(),
                    self.buf.as_mut_ptr().cast(),
                    self.buf.len(),
                )
            };
            if got <= 0 {
                break;
            }
            let mut at = 0;
            let header = std::mem::size_of::<libc::inotify_event>();
            while at + header <= got as usize {
                // SAFETY: the kernel wrote a whole event here; read unaligned.
                let event: libc::inotify_event =
                    unsafe { std::ptr::read_unaligned(self.buf[at..].as_ptr().cast()) };
                at += header + event.len as usize;
                if event.mask & libc::IN_Q_OVERFLOW != 0 {
                    // Events were lost: the caller looks at everything again.
                    changes.push(Change {
                        dir: PathBuf::new(),
                        mask: CREATED,
                    });
                } else if let Some(dir) = self.dirs.get(&event.wd) {
                    changes.push(Change {
                        dir: dir.clone(),
                        mask: event.mask,
                    });
                }
            }
        }
        Ok(changes)
    }
}
