//! A `git_patch` (ACP v2's `Diff.patch`, `format: "git_patch"`) read as the texts each hunk
//! took away and wrote, per file: what a v1 `diff` content carries as `oldText` and `newText`.
//! Pure; a malformed patch gives what it could read, never an error.

/// One file of a patch.
#[derive(Debug, PartialEq, Eq)]
pub struct FilePatch {
    /// The file after the change, as the patch names it (`b/` taken off); `None` for a file the
    /// patch deletes.
    pub path: Option<String>,
    /// The file is new (`--- /dev/null`): nothing of it was there before.
    pub added: bool,
    /// Each hunk as (the text it had: context and removed lines, the text it has: context and
    /// added lines), each line ending in `\n`.
    pub hunks: Vec<(String, String)>,
}

/// The files of patch `text`, in order. A hunk's lines are counted by its `@@ -a,b +c,d @@`
/// header, as git reads them, so a removed line that reads `-- x` is not taken for a header.
pub fn files(text: &str) -> Vec<FilePatch> {
    let mut files: Vec<FilePatch> = Vec::new();
    // Lines of the current hunk still to come: (old, new).
    let mut left = (0usize, 0usize);
    for line in text.lines() {
        let Some(file) = files.last_mut().filter(|_| left != (0, 0)) else {
            header(&mut files, line, &mut left);
            continue;
        };
        let Some((old, new)) = file.hunks.last_mut() else {
            left = (0, 0);
            continue;
        };
        match line.split_at_checked(1) {
            Some(("+", text)) => {
                push(new, text);
                left.1 = left.1.saturating_sub(1);
            }
            Some(("-", text)) => {
                push(old, text);
                left.0 = left.0.saturating_sub(1);
            }
            Some((" ", text)) => {
                push(old, text);
                push(new, text);
                left = (left.0.saturating_sub(1), left.1.saturating_sub(1));
            }
            // `\ No newline at end of file`: not a line of the file.
            Some(("\\", _)) => {}
            // An empty context line (some tools drop its space), or anything else: the hunk
            // is over.
            _ => left = (0, 0),
        }
    }
    files
}

/// A line outside a hunk: a file's start, its names, or a hunk's header.
fn header(files: &mut Vec<FilePatch>, line: &str, left: &mut (usize, usize)) {
    if line.starts_with("diff --git ") {
        files.push(FilePatch {
            path: None,
            added: false,
            hunks: Vec::new(),
        });
        return;
    }
    let Some(file) = files.last_mut() else {
        return;
    };
    if let Some(old) = line.strip_prefix("--- ") {
        file.added = old == "/dev/null";
    } else if let Some(new) = line.strip_prefix("+++ ") {
        file.path = name(new);
    } else if let Some(counts) = hunk_counts(line) {
        file.hunks.push((String::new(), String::new()));
        *left = counts;
    }
}

/// The old and new line counts of a hunk header `@@ -a[,b] +c[,d] @@`.
fn hunk_counts(line: &str) -> Option<(usize, usize)> {
    let ranges = line.strip_prefix("@@ -")?.split(" @@").next()?;
    let (old, new) = ranges.split_once(" +")?;
    let count = |range: &str| match range.split_once(',') {
        Some((_, n)) => n.parse().ok(),
        None => range.parse::<usize>().ok().map(|_| 1),
    };
    Some((count(old)?, count(new)?))
}

fn push(text: &mut String, line: &str) {
    text.push_str(line);
    text.push('\n');
}

/// A `+++` line's file: `None` for `/dev/null`; `b/` taken off; a quoted name (git quotes
/// names with special characters) unquoted for `\"`, `\\`, `\t` and `\n`.
fn name(field: &str) -> Option<String> {
    let field = field.trim_end_matches('\t');
    if field == "/dev/null" {
        return None;
    }
    let name = match field.strip_prefix('"').and_then(|f| f.strip_suffix('"')) {
        Some(quoted) => {
            let mut out = String::new();
            let mut chars = quoted.chars();
            while let Some(c) = chars.next() {
                if c != '\\' {
                    out.push(c);
                    continue;
                }
                match chars.next() {
                    Some('t') => out.push('\t'),
                    Some('n') => out.push('\n'),
                    Some(other) => out.push(other),
                    None => {}
                }
            }
            out
        }
        None => field.to_string(),
    };
    Some(
        name.strip_prefix("b/")
            .map_or_else(|| name.clone(), str::to_string),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// codex-acp's v2 patches: absolute names without prefixes; an update of two hunks, a new
    /// file, a deleted one; and a relative patch with `a/`/`b/` and a quoted name.
    #[test]
    fn a_patchs_files_give_each_hunks_old_and_new_text() {
        let patch = "diff --git /r/cart.py /r/cart.py\n--- /r/cart.py\n+++ /r/cart.py\n@@ -1,3 +1,4 @@\n-def total(items):\n-    return sum(items)\n+def total(items, d=0):\n+    gross = sum(items)\n+    return gross * (1 - d)\n \n@@ -7,2 +8,2 @@\n def count(items):\n-    return len(items)\n+    return len(list(items))\n\
diff --git /r/new.py /r/new.py\nnew file mode 100644\n--- /dev/null\n+++ /r/new.py\n@@ -0,0 +1,2 @@\n+a\n+b\n\\ No newline at end of file\n\
diff --git /r/gone.py /r/gone.py\ndeleted file mode 100644\n--- /r/gone.py\n+++ /dev/null\n@@ -1 +0,0 @@\n-x\n";
        let parsed = files(patch);
        assert_eq!(
            parsed,
            vec![
                FilePatch {
                    path: Some("/r/cart.py".into()),
                    added: false,
                    hunks: vec![
                        (
                            "def total(items):\n    return sum(items)\n\n".into(),
                            "def total(items, d=0):\n    gross = sum(items)\n    return gross * (1 - d)\n\n".into()
                        ),
                        (
                            "def count(items):\n    return len(items)\n".into(),
                            "def count(items):\n    return len(list(items))\n".into()
                        ),
                    ],
                },
                FilePatch {
                    path: Some("/r/new.py".into()),
                    added: true,
                    hunks: vec![(String::new(), "a\nb\n".into())],
                },
                FilePatch {
                    path: None,
                    added: false,
                    hunks: vec![("x\n".into(), String::new())],
                },
            ]
        );
        let relative = "diff --git \"a/sp ace\\\"q.rs\" \"b/sp ace\\\"q.rs\"\n--- \"a/sp ace\\\"q.rs\"\n+++ \"b/sp ace\\\"q.rs\"\n@@ -1 +1 @@\n-old\n+new\n";
        assert_eq!(
            files_paths(relative),
            vec![Some("sp ace\"q.rs".to_string())]
        );
        // Not a patch: nothing, and no panic.
        assert!(super::files("@@ -1 +1 @@\n+x\n\\").is_empty());
        assert_eq!(files_paths("diff --git a b\n+++ \"b/\\").len(), 1);
        // A removed line that reads like a header, counted as the hunk's.
        let sql = "diff --git a/q.sql b/q.sql\n--- a/q.sql\n+++ b/q.sql\n@@ -1,2 +1 @@\n--- a comment\n select 1;\n";
        assert_eq!(
            files(sql)[0].hunks,
            vec![(
                "-- a comment\nselect 1;\n".to_string(),
                "select 1;\n".to_string()
            )]
        );
    }

    fn files_paths(text: &str) -> Vec<Option<String>> {
        files(text).into_iter().map(|f| f.path).collect()
    }
}
