//! Lines as fingerprints: what a change of a file's text wrote and what it took away.

use std::collections::HashSet;

/// A line's fingerprint: FNV-1a (64 bits) of its text without the line break (a final `\r`
/// is part of the break). Stable across versions: enough to recognise the line later, never
/// a copy of it.
pub fn fingerprint(line: &str) -> u64 {
    let line = line.strip_suffix('\r').unwrap_or(line);
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in line.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

/// The lines of a text, without their breaks (`a\nb\n` is `a`, `b`; `a\nb` too).
pub fn split(text: &str) -> impl Iterator<Item = &str> {
    text.lines()
}

/// What changing a text from `old` to `new` did, line by line.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Change {
    /// The fingerprint of each line of `new` that a line diff does not find in `old` (one per
    /// line: a line written twice is here twice).
    pub written: Vec<u64>,
    /// The fingerprints of the texts that were in `old` and are nowhere in `new`.
    pub removed: Vec<u64>,
}

/// The change from `old` (`None`: the file was new or its text unknown, so every line of
/// `new` counts as written) to `new`.
pub fn change(old: Option<&str>, new: &str) -> Change {
    let Some(old) = old else {
        return Change {
            written: split(new).map(fingerprint).collect(),
            removed: Vec::new(),
        };
    };
    let old_lines: Vec<&str> = split(old).collect();
    let new_lines: Vec<&str> = split(new).collect();
    let ops = similar::capture_diff_slices(similar::Algorithm::Myers, &old_lines, &new_lines);
    let mut written = Vec::new();
    for op in ops {
        if let similar::DiffOp::Insert {
            new_index, new_len, ..
        }
        | similar::DiffOp::Replace {
            new_index, new_len, ..
        } = op
        {
            written.extend(
                new_lines[new_index..new_index + new_len]
                    .iter()
                    .map(|l| fingerprint(l)),
            );
        }
    }
    let remaining: HashSet<u64> = new_lines.iter().map(|l| fingerprint(l)).collect();
    let mut removed: Vec<u64> = old_lines
        .iter()
        .map(|l| fingerprint(l))
        .filter(|f| !remaining.contains(f))
        .collect();
    removed.sort_unstable();
    removed.dedup();
    Change { written, removed }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fingerprint_ignores_the_line_break_and_nothing_else() {
        assert_eq!(fingerprint("a = 1\r"), fingerprint("a = 1"));
        assert_ne!(fingerprint("a = 1 "), fingerprint("a = 1"));
        assert_ne!(fingerprint("a=1"), fingerprint("a = 1"));
        // FNV-1a's published value for the empty input: the format is fixed.
        assert_eq!(fingerprint(""), 0xcbf2_9ce4_8422_2325);
    }

    #[test]
    fn a_change_writes_the_new_lines_and_removes_the_texts_gone() {
        let c = change(Some("a\nb\nc\n"), "a\nB\nc\nd\n");
        assert_eq!(c.written, vec![fingerprint("B"), fingerprint("d")]);
        assert_eq!(c.removed, vec![fingerprint("b")]);
    }

    #[test]
    fn an_unknown_or_new_file_is_written_whole() {
        let c = change(None, "x\ny\nx\n");
        assert_eq!(
            c.written,
            vec![fingerprint("x"), fingerprint("y"), fingerprint("x")]
        );
        assert!(c.removed.is_empty());
    }

    #[test]
    fn a_text_kept_elsewhere_is_not_removed() {
        // One of two equal lines goes: the text is still in the file.
        let c = change(Some("}\nfn a() {\n}\n"), "fn a() {\n}\n");
        assert!(c.written.is_empty());
        assert!(c.removed.is_empty());
    }
}
