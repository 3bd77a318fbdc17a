//! `git blame --line-porcelain` read into [`BlamedLine`]s.

use super::attribute::BlamedLine;

/// The lines of `git blame --line-porcelain` output (every line with its commit's headers).
/// Headers it does not use are skipped; a header line of a commit is 40 (or 64) hex digits and
/// numbers.
pub fn parse(output: &str) -> Vec<BlamedLine> {
    let mut lines = Vec::new();
    let mut current: Option<BlamedLine> = None;
    for row in output.split('\n') {
        if let Some(text) = row.strip_prefix('\t') {
            if let Some(mut line) = current.take() {
                line.text = text.to_string();
                lines.push(line);
            }
            continue;
        }
        let (key, value) = row.split_once(' ').unwrap_or((row, ""));
        let Some(line) = current.as_mut() else {
            if key.len() >= 40 && key.bytes().all(|b| b.is_ascii_hexdigit()) {
                let number = value
                    .split(' ')
                    .nth(1)
                    .and_then(|n| n.parse().ok())
                    .unwrap_or(lines.len() + 1);
                current = Some(BlamedLine {
                    number,
                    text: String::new(),
                    commit: key.to_string(),
                    author: String::new(),
                    mail: String::new(),
                    author_time: 0,
                    commit_time: 0,
                    path: String::new(),
                });
            }
            continue;
        };
        match key {
            "author" => line.author = value.to_string(),
            "author-mail" => {
                line.mail = value
                    .trim_start_matches('<')
                    .trim_end_matches('>')
                    .to_string();
            }
            "author-time" => line.author_time = value.parse().unwrap_or(0),
            "committer-time" => line.commit_time = value.parse().unwrap_or(0),
            "filename" => line.path = unquote(value),
            _ => {}
        }
    }
    lines
}

/// A path as git writes it: quoted C-style when it holds unusual bytes.
fn unquote(path: &str) -> String {
    let Some(inner) = path.strip_prefix('"').and_then(|p| p.strip_suffix('"')) else {
        return path.to_string();
    };
    let mut bytes = Vec::new();
    let mut chars = inner.bytes().peekable();
    while let Some(b) = chars.next() {
        if b != b'\\' {
            bytes.push(b);
            continue;
        }
        match chars.next() {
            Some(b'n') => bytes.push(b'\n'),
            Some(b't') => bytes.push(b'\t'),
            Some(d @ b'0'..=b'7') => {
                let mut value = u32::from(d - b'0');
                for _ in 0..2 {
                    if let Some(d @ b'0'..=b'7') = chars.peek().copied() {
                        value = value * 8 + u32::from(d - b'0');
                        chars.next();
                    }
                }
                bytes.push(value as u8);
            }
            Some(other) => bytes.push(other),
            None => {}
        }
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_line_gets_its_commit_author_time_and_path() {
        let out = "\
1111111111111111111111111111111111111111 1 1 1
author Ann Person
author-mail <ann@example.com>
author-time 1700000000
author-tz +0000
committer Ann Person
committer-time 1700000100
summary first
boundary
filename \"dir/caf\\303\\251 1.rs\"
\tfn main() {
0000000000000000000000000000000000000000 2 2 1
author Not Committed Yet
author-mail <not.committed.yet>
author-time 1800000000
previous 1111111111111111111111111111111111111111 a.rs
filename a.rs
\t\tindented
";
        let lines = parse(out);
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0].number, 1);
        assert_eq!(lines[0].author, "Ann Person");
        assert_eq!(lines[0].mail, "ann@example.com");
        assert_eq!(lines[0].author_time, 1_700_000_000);
        assert_eq!(lines[0].commit_time, 1_700_000_100);
        assert_eq!(lines[0].path, "dir/café 1.rs");
        assert_eq!(lines[0].text, "fn main() {");
        assert!(!lines[0].uncommitted());
        assert_eq!(lines[1].number, 2);
        assert_eq!(lines[1].text, "\tindented");
        assert!(lines[1].uncommitted());
    }
}
