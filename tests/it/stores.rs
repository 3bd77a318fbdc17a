//! Real S3-compatible object stores on loopback for the fleet tests, installed by
//! `scripts/install-object-stores.sh`: s3s-fs (an S3 server over a directory that enforces
//! conditional writes) and Garage (a distributed, replicated store that ignores them).

use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Where the install script puts the stores.
fn stores_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("STORES_DIR") {
        return PathBuf::from(dir);
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap()).join(".cache"));
    cache.join("acp-journal/object-stores")
}

/// The installed binary `name` of `crate_version`; panics with the fix when missing.
pub fn installed(crate_version: &str, name: &str) -> PathBuf {
    let path = stores_dir().join(crate_version).join("bin").join(name);
    assert!(
        path.exists(),
        "{} is not installed: run scripts/install-object-stores.sh (scripts/test.sh does)",
        path.display()
    );
    path
}

/// A free loopback port (bound, then released for the server to take).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Wait until something listens on `port`.
pub fn wait_listening(port: u16, child: &mut Child) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        if let Some(status) = child.try_wait().unwrap() {
            panic!("the object store exited at start: {status}");
        }
        assert!(Instant::now() < deadline, "no object store on port {port}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// An s3s-fs server on loopback with one bucket.
pub struct S3sFs {
    child: Option<Child>,
    /// Its port.
    pub port: u16,
    /// The directory it serves (a bucket is a directory in it).
    pub root: tempfile::TempDir,
    /// The bucket made for the test.
    pub bucket: String,
}

/// Credentials the test stores accept.
pub const ACCESS_KEY: &str = "acpjtestkey";
/// The secret of [`ACCESS_KEY`].
pub const SECRET_KEY: &str = "acpjtestsecret0123456789";

impl S3sFs {
    /// Start one, with bucket `team`.
    pub fn start() -> S3sFs {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir(root.path().join("team")).unwrap();
        let mut server = S3sFs {
            child: None,
            port: free_port(),
            root,
            bucket: "team".into(),
        };
        server.resume();
        server
    }

    /// Stop it (the data stays).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Start it again on the same port and data.
    pub fn resume(&mut self) {
        let mut child = Command::new(installed("s3s-fs-0.14.1", "s3s-fs"))
            .args(["--host", "127.0.0.1", "--port", &self.port.to_string()])
            .args(["--access-key", ACCESS_KEY, "--secret-key", SECRET_KEY])
            .arg(self.root.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        wait_listening(self.port, &mut child);
        self.child = Some(child);
    }

    /// `s3://<bucket>/<prefix>`.
    pub fn url(&self, prefix: &str) -> String {
        format!("s3://{}/{prefix}", self.bucket)
    }

    /// The `AWS_*` variables that reach it.
    pub fn env(&self) -> Vec<(String, String)> {
        s3_env(self.port, ACCESS_KEY, SECRET_KEY, "us-east-1")
    }

    /// Every object's file under the bucket (s3s-fs keeps one file per object).
    pub fn object_files(&self) -> Vec<PathBuf> {
        let mut out = Vec::new();
        let mut dirs = vec![self.root.path().join(&self.bucket)];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
                let path = entry.path();
                if path.is_dir() {
                    dirs.push(path);
                } else {
                    out.push(path);
                }
            }
        }
        out
    }
}

impl Drop for S3sFs {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The `AWS_*` variables for an S3 server on loopback `port`.
pub fn s3_env(port: u16, key: &str, secret: &str, region: &str) -> Vec<(String, String)> {
    vec![
        (
            "AWS_ENDPOINT_URL".into(),
            format!("http://127.0.0.1:{port}"),
        ),
        ("AWS_ACCESS_KEY_ID".into(), key.into()),
        ("AWS_SECRET_ACCESS_KEY".into(), secret.into()),
        ("AWS_REGION".into(), region.into()),
        ("AWS_ALLOW_HTTP".into(), "true".into()),
    ]
}

/// Run the built binary with `args` and `env`; (exit code, stdout, stderr).
pub fn run_with(env: &[(String, String)], args: &[&str]) -> (i32, String, String) {
    let out = Command::new(crate::util::bin())
        .args(args)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A TCP relay on loopback to a server's port that can be cut and restored: a host behind it
/// loses the store while others keep it.
pub struct Cuttable {
    /// The port to connect to.
    pub port: u16,
    open: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Cuttable {
    /// Relay a fresh loopback port to `target`.
    pub fn to(target: u16) -> Cuttable {
        use std::sync::atomic::Ordering;
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let open = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
        let flag = open.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(client) = conn else { continue };
                if !flag.load(Ordering::SeqCst) {
                    continue; // dropped: refused
                }
                let Ok(server) = TcpStream::connect(("127.0.0.1", target)) else {
                    continue;
                };
                for (mut from, mut to) in [
                    (client.try_clone().unwrap(), server.try_clone().unwrap()),
                    (server, client),
                ] {
                    let flag = flag.clone();
                    std::thread::spawn(move || {
                        let mut buf = [0u8; 16384];
                        loop {
                            use std::io::{Read, Write};
                            match from.read(&mut buf) {
                                Ok(0) | Err(_) => break,
                                Ok(n) if flag.load(Ordering::SeqCst) => {
                                    if to.write_all(&buf[..n]).is_err() {
                                        break;
                                    }
                                }
                                Ok(_) => break,
                            }
                        }
                        let _ = to.shutdown(std::net::Shutdown::Both);
                        let _ = from.shutdown(std::net::Shutdown::Both);
                    });
                }
            }
        });
        Cuttable { port, open }
    }

    /// Refuse every connection from now on (open ones end at their next byte).
    pub fn cut(&self) {
        self.open.store(false, std::sync::atomic::Ordering::SeqCst);
    }

    /// Relay again.
    pub fn restore(&self) {
        self.open.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}
