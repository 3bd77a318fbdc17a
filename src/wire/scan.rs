//! The fast path of [`super::envelope::peek`]: one validating pass over a line's bytes that
//! finds the envelope's members (`id`, `method`, `params`, `result`, `error`) and
//! `params.sessionId`, building no value and copying nothing.
//!
//! It answers only for the lines it is sure of: a JSON object, valid UTF-8, whose member names
//! carry no escapes, whose envelope members appear once, whose `id` is null, a string without
//! escapes or an integer written as serde_json writes it, and whose `method` is a string
//! without escapes or null. On anything else it gives up ([`None`]) and serde_json decides, as
//! it always did. So it never accepts a line serde_json rejects and never classifies one
//! differently: the grammar it checks is serde_json's (`ignore_value`: numbers, literals,
//! strings with their escapes and no control characters; nesting deeper than 128 is left to
//! serde_json), which the differential tests (`scan_tests.rs`) and the `peek` fuzz target hold
//! it to.

/// The envelope of a line, as spans of it.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Scanned<'a> {
    /// `id`, when present.
    pub id: Option<Id<'a>>,
    /// `method`, when present: `Some(None)` when it is `null`.
    pub method: Option<Option<&'a str>>,
    /// The raw values of `params`, `result` and `error`, when present.
    pub params: Option<&'a str>,
    pub result: Option<&'a str>,
    pub error: Option<&'a str>,
    /// `params.sessionId` as [`super::envelope::str_field`] reads it.
    pub session: Session<'a>,
}

/// A request id as written.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Id<'a> {
    Null,
    /// An integer in serde_json's canonical form (no sign on zero, no leading zeros).
    Number(&'a str),
    /// A string without escapes (its contents).
    String(&'a str),
}

/// What the scan knows of `params.sessionId`.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) enum Session<'a> {
    /// No `params` object, or one without the member, or the member is not a string.
    #[default]
    None,
    /// The member's string, without escapes.
    Some(&'a str),
    /// A name or the value carries escapes: [`super::envelope::str_field`] must read it.
    Unsure,
}

/// Scan `body` (a trimmed line starting with `{`).
pub(super) fn scan(body: &[u8]) -> Option<Scanned<'_>> {
    let text = simdutf8::basic::from_utf8(body).ok()?;
    let mut s = Scan {
        text,
        b: body,
        i: 1,
    };
    let mut out = Scanned::default();
    s.ws();
    if s.peek()? == b'}' {
        s.i += 1;
    } else {
        loop {
            let name = s.plain_name()?;
            s.ws();
            s.eat(b':')?;
            s.ws();
            let start = s.i;
            match name {
                b"id" if out.id.is_none() => out.id = Some(s.id()?),
                b"method" if out.method.is_none() => out.method = Some(s.method()?),
                b"params" if out.params.is_none() => {
                    out.session = s.params()?;
                    out.params = Some(&text[start..s.i]);
                }
                b"result" if out.result.is_none() => {
                    s.value(0)?;
                    out.result = Some(&text[start..s.i]);
                }
                b"error" if out.error.is_none() => {
                    s.value(0)?;
                    out.error = Some(&text[start..s.i]);
                }
                // A second envelope member is serde_json's "duplicate field" error.
                b"id" | b"method" | b"params" | b"result" | b"error" => return None,
                _ => s.value(0)?,
            }
            s.ws();
            match s.next()? {
                b',' => s.ws(),
                b'}' => break,
                _ => return None,
            }
        }
    }
    (s.i == body.len()).then_some(out)
}

/// Nesting deeper than this is left to serde_json (whose `ignore_value` has no limit: the
/// bound only keeps this scanner's recursion small).
const MAX_DEPTH: u32 = 128;

struct Scan<'a> {
    /// The line, and its bytes.
    text: &'a str,
    b: &'a [u8],
    i: usize,
}

impl<'a> Scan<'a> {
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn next(&mut self) -> Option<u8> {
        let c = self.peek()?;
        self.i += 1;
        Some(c)
    }

    fn eat(&mut self, c: u8) -> Option<()> {
        (self.next()? == c).then_some(())
    }

    /// JSON's whitespace (serde_json's: not form feed or vertical tab).
    fn ws(&mut self) {
        while let Some(b' ' | b'\n' | b'\t' | b'\r') = self.peek() {
            self.i += 1;
        }
    }

    /// A string, its opening quote next; true when it holds an escape.
    fn string(&mut self) -> Option<bool> {
        self.eat(b'"')?;
        let mut escaped = false;
        loop {
            self.skip_plain();
            match self.next()? {
                b'"' => return Some(escaped),
                b'\\' => escaped = true,
                _ => return None,
            }
            match self.next()? {
                b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => {}
                b'u' => {
                    let hex = self.b.get(self.i..self.i + 4)?;
                    if !hex.iter().all(u8::is_ascii_hexdigit) {
                        return None;
                    }
                    self.i += 4;
                }
                _ => return None,
            }
        }
    }

    /// Move to the next byte a string cannot hold as it is (`"`, `\\`, a control
    /// character), or to the end: sixteen bytes at a time, then eight as serde_json's
    /// `skip_to_escape`, then one.
    fn skip_plain(&mut self) {
        #[cfg(target_arch = "x86_64")]
        while let Some(chunk) = self.b.get(self.i..self.i + 16) {
            let special = special16(chunk.try_into().expect("sixteen bytes"));
            if special != 0 {
                self.i += special.trailing_zeros() as usize;
                return;
            }
            self.i += 16;
        }
        const ONES: u64 = u64::from_ne_bytes([1; 8]);
        const HIGH: u64 = ONES << 7;
        while let Some(chunk) = self.b.get(self.i..self.i + 8) {
            let chunk = u64::from_le_bytes(chunk.try_into().expect("eight bytes"));
            let quote = chunk ^ (ONES * u64::from(b'"'));
            let backslash = chunk ^ (ONES * u64::from(b'\\'));
            // A byte's high bit is set where it is below 0x20, a quote or a backslash; a
            // borrow may also set it in the bytes after such a byte, never before.
            let special = (chunk.wrapping_sub(ONES * 0x20) & !chunk)
                | (quote.wrapping_sub(ONES) & !quote)
                | (backslash.wrapping_sub(ONES) & !backslash);
            let special = special & HIGH;
            if special != 0 {
                self.i += special.trailing_zeros() as usize / 8;
                return;
            }
            self.i += 8;
        }
        while let Some(&c) = self.b.get(self.i) {
            if c == b'"' || c == b'\\' || c < 0x20 {
                return;
            }
            self.i += 1;
        }
    }

    /// A member name without escapes, and its closing quote.
    fn plain_name(&mut self) -> Option<&'a [u8]> {
        let start = self.i + 1;
        match self.string()? {
            false => Some(&self.b[start..self.i - 1]),
            true => None,
        }
    }

    /// A string without escapes: its contents.
    fn plain_string(&mut self) -> Option<&'a str> {
        let start = self.i + 1;
        match self.string()? {
            false => Some(&self.text[start..self.i - 1]),
            true => None,
        }
    }

    fn literal(&mut self, word: &[u8]) -> Option<()> {
        let end = self.i + word.len();
        (self.b.get(self.i..end)? == word).then(|| self.i = end)
    }

    fn digits(&mut self) -> usize {
        let start = self.i;
        while let Some(b'0'..=b'9') = self.peek() {
            self.i += 1;
        }
        self.i - start
    }

    /// A number: `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`.
    fn number(&mut self) -> Option<()> {
        if self.peek() == Some(b'-') {
            self.i += 1;
        }
        match self.next()? {
            b'0' => {}
            b'1'..=b'9' => {
                self.digits();
            }
            _ => return None,
        }
        if self.peek() == Some(b'.') {
            self.i += 1;
            (self.digits() > 0).then_some(())?;
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.i += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.i += 1;
            }
            (self.digits() > 0).then_some(())?;
        }
        // `01` is one invalid number, not two tokens.
        (!matches!(self.peek(), Some(b'0'..=b'9'))).then_some(())
    }

    /// Any value, `depth` containers in.
    fn value(&mut self, depth: u32) -> Option<()> {
        match self.peek()? {
            b'"' => self.string().map(drop),
            b'{' => self.object(depth, |s, _| s.value(depth + 1)),
            b'[' => {
                (depth < MAX_DEPTH).then_some(())?;
                self.i += 1;
                self.ws();
                if self.peek()? == b']' {
                    self.i += 1;
                    return Some(());
                }
                loop {
                    self.value(depth + 1)?;
                    self.ws();
                    match self.next()? {
                        b',' => self.ws(),
                        b']' => return Some(()),
                        _ => return None,
                    }
                }
            }
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'n' => self.literal(b"null"),
            b'-' | b'0'..=b'9' => self.number(),
            _ => None,
        }
    }

    /// An object `depth` containers in, its `{` next: `member` reads each value (the name
    /// given, `None` when it has escapes), the scanner at it.
    fn object(
        &mut self,
        depth: u32,
        mut member: impl FnMut(&mut Self, Option<&'a [u8]>) -> Option<()>,
    ) -> Option<()> {
        (depth < MAX_DEPTH).then_some(())?;
        self.eat(b'{')?;
        self.ws();
        if self.peek()? == b'}' {
            self.i += 1;
            return Some(());
        }
        loop {
            let start = self.i + 1;
            let name = (!self.string()?).then(|| &self.b[start..self.i - 1]);
            self.ws();
            self.eat(b':')?;
            self.ws();
            member(self, name)?;
            self.ws();
            match self.next()? {
                b',' => self.ws(),
                b'}' => return Some(()),
                _ => return None,
            }
        }
    }

    fn id(&mut self) -> Option<Id<'a>> {
        match self.peek()? {
            b'"' => self.plain_string().map(Id::String),
            b'n' => self.literal(b"null").map(|()| Id::Null),
            _ => {
                let start = self.i;
                self.number()?;
                let n = &self.text[start..self.i];
                // Only integers serde_json prints back as written (`-0` prints as `0`,
                // `1.0` as `1.0` but `1e2` as `100.0`): the others are left to it.
                let digits = n.strip_prefix('-').unwrap_or(n);
                let canonical = digits.len() <= 18
                    && digits.bytes().all(|c| c.is_ascii_digit())
                    && (digits == "0" && n == "0" || !digits.starts_with('0'));
                canonical.then_some(Id::Number(n))
            }
        }
    }

    fn method(&mut self) -> Option<Option<&'a str>> {
        match self.peek()? {
            b'"' => self.plain_string().map(Some),
            b'n' => self.literal(b"null").map(|()| None),
            _ => None,
        }
    }

    /// The `params` value, and what it says of `sessionId`: the first member of that name
    /// decides, as in [`super::envelope::str_field`].
    fn params(&mut self) -> Option<Session<'a>> {
        if self.peek()? != b'{' {
            self.value(0)?;
            return Some(Session::None);
        }
        let mut session = Session::None;
        let mut decided = false;
        self.object(0, |s, name| {
            match name {
                _ if decided => {}
                None => {
                    // An escaped name may spell `sessionId`.
                    session = Session::Unsure;
                    decided = true;
                }
                Some(b"sessionId") => {
                    decided = true;
                    if s.peek()? == b'"' {
                        let start = s.i + 1;
                        session = match s.string()? {
                            false => Session::Some(&s.text[start..s.i - 1]),
                            true => Session::Unsure,
                        };
                        return Some(());
                    }
                }
                Some(_) => {}
            }
            s.value(1)
        })?;
        Some(session)
    }
}

/// A bit for each of `chunk`'s bytes that a string cannot hold as it is (`"`, `\\`, below
/// 0x20), lowest bit first: four SSE2 comparisons and a mask.
#[cfg(target_arch = "x86_64")]
fn special16(chunk: &[u8; 16]) -> u32 {
    use std::arch::x86_64::{
        _mm_cmpeq_epi8, _mm_loadu_si128, _mm_max_epu8, _mm_movemask_epi8, _mm_or_si128,
        _mm_set1_epi8,
    };
    // SAFETY: SSE2 is part of every x86_64 CPU (the target's baseline), and the load reads the
    // sixteen bytes of `chunk`, unaligned loads allowed.
    unsafe {
        let v = _mm_loadu_si128(chunk.as_ptr().cast());
        let quote = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'"' as i8));
        let backslash = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'\\' as i8));
        // Unsigned `c < 0x20` is `max(c, 0x1f) == 0x1f`.
        let low = _mm_set1_epi8(0x1f);
        let control = _mm_cmpeq_epi8(_mm_max_epu8(v, low), low);
        _mm_movemask_epi8(_mm_or_si128(_mm_or_si128(quote, backslash), control)) as u32
    }
}

#[cfg(test)]
#[path = "scan_tests.rs"]
mod tests;
