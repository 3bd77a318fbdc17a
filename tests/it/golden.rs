//! Golden files: `show` and every `export` format of the sample stores, byte for byte through
//! the built binary. `UPDATE_GOLDEN=1 cargo test --test it golden` rewrites them (review the
//! diff). Output is deterministic: times are printed in UTC and no path of this machine appears.

use std::path::Path;

use crate::util::{only_session, root, run_cli};

const SAMPLES: [&str; 4] = [
    "python-echo-agent",
    "rust-v2-agent",
    "scripted-subagents",
    "typescript-agent",
];

/// Run the binary on each sample with `args` after the session ID, and compare its stdout with
/// `tests/golden/<kind>/<sample>.<ext>`.
fn check(kind: &str, ext: &str, args: &[&str]) {
    for sample in SAMPLES {
        let store = root().join("journals").join(sample);
        let session = only_session(&store);
        let (command, rest) = args.split_first().unwrap();
        let mut argv = vec![*command, "--journal-dir", store.to_str().unwrap(), &session];
        argv.extend(rest);
        let (code, out, err) = run_cli(&argv);
        assert_eq!(code, 0, "{argv:?}: {err}");
        compare(
            &root().join(format!("tests/golden/{kind}/{sample}.{ext}")),
            &out,
        );
    }
}

fn compare(golden: &Path, actual: &str) {
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::create_dir_all(golden.parent().unwrap()).unwrap();
        std::fs::write(golden, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(golden).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; create it with UPDATE_GOLDEN=1 cargo test --test it golden",
            golden.display()
        )
    });
    if expected != actual {
        let line = expected
            .lines()
            .zip(actual.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| expected.lines().count().min(actual.lines().count()));
        panic!(
            "{} differs from the output at line {}:\n~~~ expected\n{}\n~~~ got\n{}\n~~~\n\
             (UPDATE_GOLDEN=1 cargo test --test it golden rewrites it)",
            golden.display(),
            line + 1,
            expected.lines().nth(line).unwrap_or("<end>"),
            actual.lines().nth(line).unwrap_or("<end>"),
        );
    }
}

#[test]
fn golden_show() {
    check("show", "txt", &["show"]);
}

#[test]
fn golden_export_markdown() {
    check("export", "md", &["export", "--format", "markdown"]);
}

#[test]
fn golden_export_ndjson() {
    check("export", "ndjson", &["export", "--format", "ndjson"]);
}

#[test]
fn golden_export_html() {
    check("export", "html", &["export", "--format", "html"]);
}
