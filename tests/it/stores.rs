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
    crate::util::full_tier("the object stores (scripts/install-object-stores.sh)");
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

/// A Garage cluster on loopback: `nodes` nodes, each object on every node (replication factor
/// `nodes`), one bucket `team` and one key.
pub struct Garage {
    nodes: Vec<GarageNode>,
    /// The nodes' data and configuration, removed with the cluster.
    _dir: tempfile::TempDir,
}

struct GarageNode {
    child: Option<Child>,
    config: PathBuf,
    s3_port: u16,
}

/// The key the Garage tests import (Garage's formats: `GK` + 24 hex digits, 64 hex digits).
pub const GARAGE_KEY: &str = "GK0a1b2c3d4e5f60718293a4b5";
/// Its secret.
pub const GARAGE_SECRET: &str = "5f0e1d2c3b4a59687766554433221100ffeeddccbbaa99887766554433221100";

impl Garage {
    /// Start a cluster of `nodes` and set up its layout, bucket and key.
    pub fn start(nodes: usize) -> Garage {
        let dir = tempfile::tempdir().unwrap();
        let mut list = Vec::new();
        for n in 0..nodes {
            let (rpc, s3) = (free_port(), free_port());
            let node = dir.path().join(format!("node{n}"));
            std::fs::create_dir_all(&node).unwrap();
            let config = node.join("garage.toml");
            std::fs::write(
                &config,
                format!(
                    "metadata_dir = \"{meta}\"\ndata_dir = \"{data}\"\ndb_engine = \"sqlite\"\n\
                     replication_factor = {nodes}\nrpc_bind_addr = \"127.0.0.1:{rpc}\"\n\
                     rpc_public_addr = \"127.0.0.1:{rpc}\"\n\
                     rpc_secret = \"00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff\"\n\
                     [s3_api]\ns3_region = \"garage\"\napi_bind_addr = \"127.0.0.1:{s3}\"\n",
                    meta = node.join("meta").display(),
                    data = node.join("data").display(),
                ),
            )
            .unwrap();
            let mut g = GarageNode {
                child: None,
                config,
                s3_port: s3,
            };
            g.start();
            list.push(g);
        }
        let garage = Garage {
            nodes: list,
            _dir: dir,
        };
        let ids: Vec<String> = (0..nodes)
            .map(|n| garage.cli(n, &["node", "id", "-q"]).trim().to_string())
            .collect();
        for id in &ids[1..] {
            garage.cli(0, &["node", "connect", id]);
        }
        for (n, id) in ids.iter().enumerate() {
            let node = id.split('@').next().unwrap();
            let zone = format!("dc{n}");
            garage.cli(0, &["layout", "assign", "-z", &zone, "-c", "1G", node]);
        }
        garage.cli(0, &["layout", "apply", "--version", "1"]);
        let deadline = Instant::now() + Duration::from_secs(60);
        while !garage.try_cli(0, &["bucket", "create", "team"]) {
            assert!(Instant::now() < deadline, "garage: no bucket");
            std::thread::sleep(Duration::from_millis(300));
        }
        garage.cli(0, &["key", "import", "--yes", GARAGE_KEY, GARAGE_SECRET]);
        garage.cli(
            0,
            &[
                "bucket", "allow", "--read", "--write", "--owner", "team", "--key", GARAGE_KEY,
            ],
        );
        garage
    }

    fn command(&self, node: usize, args: &[&str]) -> std::process::Output {
        Command::new(installed("garage-2.5.0", "garage"))
            .arg("-c")
            .arg(&self.nodes[node].config)
            .args(args)
            .output()
            .unwrap()
    }

    fn try_cli(&self, node: usize, args: &[&str]) -> bool {
        self.command(node, args).status.success()
    }

    fn cli(&self, node: usize, args: &[&str]) -> String {
        let out = self.command(node, args);
        assert!(
            out.status.success(),
            "garage {args:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The `AWS_*` variables that reach node `node`'s S3 API.
    pub fn env(&self, node: usize) -> Vec<(String, String)> {
        s3_env(
            self.nodes[node].s3_port,
            GARAGE_KEY,
            GARAGE_SECRET,
            "garage",
        )
    }

    /// Kill node `node` (SIGKILL).
    pub fn kill(&mut self, node: usize) {
        if let Some(mut child) = self.nodes[node].child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl GarageNode {
    fn start(&mut self) {
        let mut child = Command::new(installed("garage-2.5.0", "garage"))
            .arg("-c")
            .arg(&self.config)
            .arg("server")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        wait_listening(self.s3_port, &mut child);
        self.child = Some(child);
    }
}

impl Drop for Garage {
    fn drop(&mut self) {
        for n in 0..self.nodes.len() {
            self.kill(n);
        }
    }
}
