//! A wire line printed as `serde_json::to_string_pretty` prints its `Value`, without building
//! the `Value` (a map and strings per object): one pass over the bytes writes the output.
//!
//! Exact: what it prints is what serde_json prints for the `Value` it would parse: the pretty
//! layout (two spaces, `": "`, `[]` and `{}` when empty), strings re-escaped as serde_json
//! escapes them (`\/` and `\u00e9` come out as `/` and `é`), integers as written, other numbers
//! parsed by serde_json and printed by it. Runs without escapes, the bulk of a line, are copied
//! whole. Whatever it cannot vouch for makes it give up, and the caller takes the `Value` path:
//! any syntax error, a lone surrogate, a number out of range, nesting deeper than
//! [`MAX_DEPTH`], and an object with a repeated key (a `Value` keeps one member per key, the
//! last, where the first was) or more than [`MAX_KEYS`] keys.

/// Keys of one object compared for repeats, at most; past that the `Value` path prints it.
const MAX_KEYS: usize = 64;
/// Deepest nesting printed here (serde_json refuses past 128).
const MAX_DEPTH: usize = 100;

/// What [`pretty`] read at the top level of the line (an object's members).
#[derive(Default)]
pub(crate) struct Top {
    /// `method`, when it is a string.
    pub(crate) method: Option<String>,
    /// `id` as compact JSON.
    pub(crate) id: Option<String>,
    /// An `error` member is present.
    pub(crate) error: bool,
}

/// `line` printed as `to_string_pretty` prints `serde_json::from_slice::<Value>(line)`, and its
/// top-level members of note; `None` when that parse fails or this printer steps aside.
pub(crate) fn pretty(line: &[u8]) -> Option<(Top, String)> {
    // Invalid UTF-8 fails a `Value` parse too; checked once, the copied runs stay valid.
    std::str::from_utf8(line).ok()?;
    let mut p = Printer {
        src: line,
        pos: 0,
        out: Vec::with_capacity(line.len() + line.len() / 2 + 16),
        depth: 0,
        keys: Vec::new(),
        top: Top::default(),
    };
    p.whitespace();
    p.value()?;
    p.whitespace();
    if p.pos != line.len() {
        return None;
    }
    let top = std::mem::take(&mut p.top);
    Some((top, String::from_utf8(p.out).ok()?))
}

struct Printer<'a> {
    src: &'a [u8],
    pos: usize,
    out: Vec<u8>,
    depth: usize,
    /// Where each key of the objects being printed was written (`out[start..end]`).
    keys: Vec<(usize, usize)>,
    top: Top,
}

impl Printer<'_> {
    fn peek(&self) -> Option<u8> {
        self.src.get(self.pos).copied()
    }

    fn whitespace(&mut self) {
        while let Some(b' ' | b'\n' | b'\t' | b'\r') = self.peek() {
            self.pos += 1;
        }
    }

    /// Take `expected` (after whitespace).
    fn eat(&mut self, expected: u8) -> Option<()> {
        self.whitespace();
        (self.peek()? == expected).then(|| self.pos += 1)
    }

    fn newline(&mut self) {
        self.out.push(b'\n');
        for _ in 0..self.depth {
            self.out.extend_from_slice(b"  ");
        }
    }

    fn value(&mut self) -> Option<()> {
        self.whitespace();
        match self.peek()? {
            b'{' => self.object(),
            b'[' => self.array(),
            b'"' => self.string(),
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'n' => self.literal(b"null"),
            b'-' | b'0'..=b'9' => self.number(),
            _ => None,
        }
    }

    fn literal(&mut self, word: &[u8]) -> Option<()> {
        let found = self.src[self.pos..].starts_with(word);
        found.then(|| {
            self.pos += word.len();
            self.out.extend_from_slice(word);
        })
    }

    /// Opens a nesting level: `None` past [`MAX_DEPTH`].
    fn enter(&mut self, open: u8) -> Option<()> {
        self.pos += 1;
        self.depth += 1;
        self.out.push(open);
        (self.depth <= MAX_DEPTH).then_some(())
    }

    /// Closes a nesting level; `any` when it had members.
    fn leave(&mut self, any: bool, close: u8) {
        self.depth -= 1;
        if any {
            self.newline();
        }
        self.out.push(close);
    }

    fn array(&mut self) -> Option<()> {
        self.enter(b'[')?;
        self.whitespace();
        if self.peek()? == b']' {
            self.pos += 1;
            self.leave(false, b']');
            return Some(());
        }
        loop {
            self.newline();
            self.value()?;
            self.whitespace();
            match self.peek()? {
                b',' => {
                    self.pos += 1;
                    self.out.push(b',');
                }
                b']' => break,
                _ => return None,
            }
        }
        self.pos += 1;
        self.leave(true, b']');
        Some(())
    }

    fn object(&mut self) -> Option<()> {
        let top = self.depth == 0;
        self.enter(b'{')?;
        self.whitespace();
        if self.peek()? == b'}' {
            self.pos += 1;
            self.leave(false, b'}');
            return Some(());
        }
        let first_key = self.keys.len();
        loop {
            self.newline();
            self.whitespace();
            if self.peek()? != b'"' {
                return None;
            }
            let start = self.out.len();
            self.string()?;
            let end = self.out.len();
            let key = &self.out[start..end];
            let repeated = self.keys[first_key..]
                .iter()
                .any(|&(s, e)| self.out[s..e] == *key);
            if repeated || self.keys.len() - first_key >= MAX_KEYS {
                return None;
            }
            self.keys.push((start, end));
            self.eat(b':')?;
            self.out.extend_from_slice(b": ");
            let value = self.out.len();
            self.value()?;
            if top {
                self.note_top(start..end, value)?;
            }
            self.whitespace();
            match self.peek()? {
                b',' => {
                    self.pos += 1;
                    self.out.push(b',');
                }
                b'}' => break,
                _ => return None,
            }
        }
        self.pos += 1;
        self.keys.truncate(first_key);
        self.leave(true, b'}');
        Some(())
    }

    /// Remember a top-level member printed at `key` with its value from `value` on.
    fn note_top(&mut self, key: std::ops::Range<usize>, value: usize) -> Option<()> {
        let printed = &self.out[value..];
        match &self.out[key] {
            b"\"id\"" => {
                if printed.contains(&b'\n') {
                    return None; // pretty is not compact
                }
                self.top.id = Some(String::from_utf8_lossy(printed).into_owned());
            }
            b"\"method\"" => self.top.method = serde_json::from_slice::<String>(printed).ok(),
            b"\"error\"" => self.top.error = true,
            _ => {}
        }
        Some(())
    }

    /// A string, re-escaped as serde_json escapes it.
    fn string(&mut self) -> Option<()> {
        self.pos += 1;
        self.out.push(b'"');
        loop {
            let rest = &self.src[self.pos..];
            let stop = memchr::memchr2(b'"', b'\\', rest)?;
            let run = &rest[..stop];
            // A raw control character is a syntax error (serde_json refuses it too).
            if run.iter().fold(false, |bad, b| bad | (*b < 0x20)) {
                return None;
            }
            self.out.extend_from_slice(run);
            self.pos += stop + 1;
            if rest[stop] == b'"' {
                self.out.push(b'"');
                return Some(());
            }
            let escape = self.peek()?;
            self.pos += 1;
            let c = match escape {
                b'"' => '"',
                b'\\' => '\\',
                b'/' => '/',
                b'b' => '\u{8}',
                b'f' => '\u{c}',
                b'n' => '\n',
                b'r' => '\r',
                b't' => '\t',
                b'u' => self.unicode_escape()?,
                _ => return None,
            };
            self.char(c);
        }
    }

    /// The character of a `\u` escape (its `XXXX` next), a surrogate pair read whole; `None`
    /// for a lone surrogate.
    fn unicode_escape(&mut self) -> Option<char> {
        let first = self.hex4()?;
        match first {
            0xD800..=0xDBFF => {
                if !self.src[self.pos..].starts_with(b"\\u") {
                    return None;
                }
                self.pos += 2;
                let second = self.hex4()?;
                if !(0xDC00..=0xDFFF).contains(&second) {
                    return None;
                }
                char::from_u32(0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00))
            }
            0xDC00..=0xDFFF => None,
            _ => char::from_u32(first),
        }
    }

    fn hex4(&mut self) -> Option<u32> {
        let digits = self.src.get(self.pos..self.pos + 4)?;
        let mut n = 0;
        for d in digits {
            n = n * 16 + char::from(*d).to_digit(16)?;
        }
        self.pos += 4;
        Some(n)
    }

    /// One character of a string as serde_json writes it.
    fn char(&mut self, c: char) {
        let short = match c {
            '"' => b'"',
            '\\' => b'\\',
            '\u{8}' => b'b',
            '\u{c}' => b'f',
            '\n' => b'n',
            '\r' => b'r',
            '\t' => b't',
            c if u32::from(c) < 0x20 => {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                let n = u32::from(c) as usize;
                self.out
                    .extend_from_slice(&[b'\\', b'u', b'0', b'0', HEX[n >> 4], HEX[n & 0xF]]);
                return;
            }
            c => {
                let mut utf8 = [0; 4];
                self.out
                    .extend_from_slice(c.encode_utf8(&mut utf8).as_bytes());
                return;
            }
        };
        self.out.extend_from_slice(&[b'\\', short]);
    }

    /// A number: an integer as written when serde_json reads it as one (a `u64`, or an `i64`
    /// below zero), any other (fractions, exponents, `-0`, past 64 bits) through serde_json's
    /// own parsing and printing.
    fn number(&mut self) -> Option<()> {
        let start = self.pos;
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        let digits = self.digits();
        let first = *self.src.get(self.pos - digits)?;
        if digits == 0 || (first == b'0' && digits > 1) {
            return None;
        }
        let mut integer = true;
        if self.peek() == Some(b'.') {
            self.pos += 1;
            integer = false;
            if self.digits() == 0 {
                return None;
            }
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.pos += 1;
            integer = false;
            if let Some(b'+' | b'-') = self.peek() {
                self.pos += 1;
            }
            if self.digits() == 0 {
                return None;
            }
        }
        let text = std::str::from_utf8(&self.src[start..self.pos]).ok()?;
        let fits = integer
            && match text.strip_prefix('-') {
                // `-0` is a float to serde_json.
                Some(_) => text.parse::<i64>().is_ok_and(|n| n != 0),
                None => text.parse::<u64>().is_ok(),
            };
        if fits {
            self.out.extend_from_slice(text.as_bytes());
            return Some(());
        }
        let n: f64 = serde_json::from_str(text).ok()?;
        if !n.is_finite() {
            return None;
        }
        serde_json::to_writer(&mut self.out, &n).ok()
    }

    fn digits(&mut self) -> usize {
        let n = self.src[self.pos..]
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count();
        self.pos += n;
        n
    }
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;

    /// What the `Value` path prints.
    fn slow(line: &[u8]) -> Option<String> {
        serde_json::from_slice::<Value>(line)
            .ok()
            .map(|v| serde_json::to_string_pretty(&v).unwrap())
    }

    /// `pretty` agrees with the `Value` path whenever it answers, top members included.
    fn agrees(line: &[u8]) -> bool {
        let Some((top, text)) = pretty(line) else {
            return false;
        };
        assert_eq!(
            Some(&text),
            slow(line).as_ref(),
            "{}",
            String::from_utf8_lossy(line)
        );
        let v: Value = serde_json::from_slice(line).unwrap();
        assert_eq!(top.id, v.get("id").map(Value::to_string));
        assert_eq!(top.method.as_deref(), v["method"].as_str());
        assert_eq!(top.error, v.get("error").is_some());
        true
    }

    #[test]
    fn prints_as_a_value_prints_or_steps_aside() {
        let deep = |n: usize| format!("{}1{}", "[".repeat(n), "]".repeat(n));
        let many_keys = format!(
            "{{{}}}",
            (0..70)
                .map(|i| format!("\"k{i}\":{i}"))
                .collect::<Vec<_>>()
                .join(",")
        );
        let printed: &[&str] = &[
            r#"{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"prompt":[{"type":"text","text":"hi \"x\" \u00e9 \n"}],"e":[],"o":{},"n":null,"b":true,"f":1.50,"g":-0,"h":1E3,"i":-12,"j":18446744073709551615,"k":[[],[{}],[1,[2]]]}}"#,
            r#"{"id":"p-1","result":{"outcome":{"outcome":"selected"}}}"#,
            r#"{"id":[],"result":null}"#,
            r#"{"s":"\/ \b\f\n\r\t \u0001 \u001F \u007f \u00E9 \ud83d\ude00 \u2028 \" \\ <&>"}"#,
            r#"{"n":[0,-1,1.0,-1.5e-7,1e22,123456789012345678901234,-9223372036854775808,-9223372036854775809,0.1e1,2E+2]}"#,
            r#"{"\u0061":1,"b":2}"#,
            r#"[1,{"a":"b"},[]]"#,
            r#""just a string""#,
            "12",
            "{}",
            "[]",
            " {\"a\" : 1 ,\t\"b\"\n:\r[ ] } ",
            "{\"method\":\"a\\/b\",\"id\":\"x\\u0041\"}",
        ];
        for line in printed {
            assert!(agrees(line.as_bytes()), "printed here: {line}");
        }
        let deep_ok = deep(MAX_DEPTH);
        assert!(agrees(deep_ok.as_bytes()));
        // Left to the `Value` path, which prints them (an id that is not compact when pretty,
        // repeated keys, too deep, too many keys)…
        let aside = [
            r#"{"id":{"a":1},"error":{"code":-32603,"message":"boom"}}"#.to_string(),
            r#"{"method":"x","params":{"a":1,"a":2}}"#.to_string(),
            r#"{"\u0061":1,"a":2}"#.to_string(),
            deep(MAX_DEPTH + 1),
            many_keys,
        ];
        for line in &aside {
            assert!(pretty(line.as_bytes()).is_none(), "{line}");
            assert!(slow(line.as_bytes()).is_some(), "{line}");
        }
        // … or refuses (not JSON as serde_json reads it).
        let refused: &[&[u8]] = &[
            br#"{"s":"\ud800"}"#,
            br#"{"s":"\udc00x"}"#,
            br#"{"s":"\ud800\u0041"}"#,
            br#"{"n":1e400}"#,
            br#"{"n":01}"#,
            br#"{"n":1.}"#,
            br#"{"n":-}"#,
            br#"{"s":"\x"}"#,
            br#"{"s":"\u12"}"#,
            b"{\"s\":\"tab\there\"}",
            b"{\"s\":\"\xff\"}",
            br#"{"a":1,}"#,
            br#"[1,]"#,
            br#"{"a" 1}"#,
            br#"{"a":tru}"#,
            br#"{"a":"unterminated}"#,
            b"not json",
            b"{\"a\":1} x",
            b"",
        ];
        for line in refused {
            assert!(pretty(line).is_none(), "{}", String::from_utf8_lossy(line));
            assert!(slow(line).is_none(), "{}", String::from_utf8_lossy(line));
        }
        assert!(slow(deep(200).as_bytes()).is_none() && pretty(deep(200).as_bytes()).is_none());
    }

    /// Mutated lines (bytes JSON cares about, inserted, replaced and cut at random): whenever
    /// `pretty` prints one, it prints what the `Value` path prints.
    #[test]
    fn agrees_with_the_value_path_on_mutated_lines() {
        let seeds: &[&[u8]] = &[
            br#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"a \"b\" \n\u00e9"}}}}"#,
            br#"{"jsonrpc":"2.0","id":7,"result":{"stopReason":"end_turn","usage":{"inputTokens":12,"cost":0.25}}}"#,
            br#"{"id":"p","error":{"code":-32603,"message":"x","data":[null,true,false,-1e3]}}"#,
        ];
        let alphabet = b"{}[]\":,\\/ubfnrt0123456789-+.eE \t\n\x01\xc3\xa9aA\"";
        let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut next = |n: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % n as u64) as usize
        };
        let (mut printed, mut tried) = (0, 0);
        for _ in 0..20_000 {
            let mut line = seeds[next(seeds.len())].to_vec();
            for _ in 0..=next(3) {
                let at = next(line.len() + 1);
                let byte = alphabet[next(alphabet.len())];
                match next(3) {
                    0 => line.insert(at, byte),
                    1 if at < line.len() => line[at] = byte,
                    _ => line.truncate(at.max(1)),
                }
            }
            tried += 1;
            printed += usize::from(agrees(&line));
        }
        // Enough of the mutants stay JSON for the comparison to mean something.
        assert!(printed > tried / 20, "{printed} of {tried}");
    }
}
