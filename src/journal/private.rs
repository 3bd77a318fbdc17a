//! Private files: directories 0700 and files 0600 whatever the umask, and (on Linux) unnamed
//! files that get their name only once they are whole.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// Create a directory (and parents) with mode 0700, tightening it if it already exists.
///
/// # Errors
/// I/O errors.
pub fn create_private_dir(path: &Path) -> io::Result<()> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(path)?;
    let perms = fs::metadata(path)?.permissions();
    if perms.mode() & 0o077 != 0 {
        fs::set_permissions(path, fs::Permissions::from_mode(0o700))?;
    }
    Ok(())
}

/// Create a new file (it must not exist) with mode 0600 whatever the umask.
///
/// # Errors
/// I/O errors; `AlreadyExists` when the path is taken.
pub fn create_private_file(path: &Path) -> io::Result<File> {
    let file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    file.set_permissions(fs::Permissions::from_mode(0o600))?;
    Ok(file)
}

/// A new unnamed file in `dir`, mode 0600 (`O_TMPFILE`); `None` where the file system or the
/// kernel cannot make one.
#[cfg(target_os = "linux")]
pub(super) fn unnamed_private_file(dir: &Path) -> io::Result<Option<File>> {
    match OpenOptions::new()
        .write(true)
        .mode(0o600)
        .custom_flags(libc::O_TMPFILE)
        .open(dir)
    {
        Ok(file) => {
            file.set_permissions(fs::Permissions::from_mode(0o600))?;
            Ok(Some(file))
        }
        Err(e)
            if matches!(
                e.raw_os_error(),
                Some(libc::EOPNOTSUPP | libc::EISDIR | libc::EINVAL)
            ) =>
        {
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// Give an unnamed file the name `to` (`AlreadyExists` when it is taken).
#[cfg(target_os = "linux")]
pub(super) fn link_unnamed(file: &File, to: &Path) -> io::Result<()> {
    use std::ffi::CString;
    use std::os::fd::AsRawFd;
    use std::os::unix::ffi::OsStrExt;
    let from = CString::new(format!("/proc/self/fd/{}", file.as_raw_fd()))?;
    let to = CString::new(to.as_os_str().as_bytes())?;
    // SAFETY: both paths are valid NUL-terminated strings that outlive the call.
    let linked = unsafe {
        libc::linkat(
            libc::AT_FDCWD,
            from.as_ptr(),
            libc::AT_FDCWD,
            to.as_ptr(),
            libc::AT_SYMLINK_FOLLOW,
        )
    };
    if linked == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}
