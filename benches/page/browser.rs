//! The browser the page's benches drive: Debian's headless chromium and the puppeteer-core that
//! `scripts/install-chromium.sh` pins in `<peers>/browser/` (`--bench page`, and `--bench
//! fleet`'s team page, which takes this file in by `#[path]`).

use std::path::{Path, PathBuf};

/// The peers' directory: `$ACP_JOURNAL_PEERS`, else `.peers` in the checkout.
pub fn peers() -> PathBuf {
    std::env::var_os("ACP_JOURNAL_PEERS")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join(".peers"))
}

/// The chromium the drivers launch: `$ACP_JOURNAL_CHROMIUM`, else Debian's.
fn chromium() -> PathBuf {
    std::env::var_os("ACP_JOURNAL_CHROMIUM")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/bin/chromium"))
}

/// What is missing of the browser and its driver, and how to install it; `None` when both are
/// there.
pub fn missing() -> Option<(PathBuf, &'static str)> {
    [
        (
            peers().join("browser/.stamp"),
            "puppeteer-core: run scripts/install-chromium.sh",
        ),
        (chromium(), "chromium: run scripts/install-chromium.sh"),
    ]
    .into_iter()
    .find(|(path, _)| !path.exists())
}

/// `script` (a path in the checkout) copied beside puppeteer-core as `name`, so that node
/// finds the package: its path there.
pub fn beside_puppeteer(script: &str, name: &str) -> PathBuf {
    let copy = peers().join("browser").join(name);
    std::fs::copy(Path::new(env!("CARGO_MANIFEST_DIR")).join(script), &copy)
        .unwrap_or_else(|e| panic!("copying {script} beside puppeteer-core: {e}"));
    copy
}
