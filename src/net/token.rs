//! The bearer token every request to `acp-journal serve` must carry, and the browser page's
//! cookie derived from it.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use base64::Engine;

use crate::journal::private::create_private_file;

/// A secret compared in constant time.
#[derive(Clone)]
pub struct Token(String);

/// Where the token came from (said in the log, never the token itself).
#[derive(Debug, PartialEq, Eq)]
pub enum TokenSource {
    /// `ACP_JOURNAL_TOKEN`.
    Environment,
    /// `--token-file` (or the store's file, read again).
    File(PathBuf),
    /// Made at this start and written to this 0600 file.
    Generated(PathBuf),
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(…)")
    }
}

impl Token {
    /// A token given as it is (trimmed); `None` when empty or not all visible ASCII (it must
    /// fit an `Authorization` header).
    pub fn new(secret: &str) -> Option<Token> {
        let secret = secret.trim();
        let fits = !secret.is_empty() && secret.bytes().all(|b| b.is_ascii_graphic());
        fits.then(|| Token(secret.to_string()))
    }

    /// The token: from `env` (`ACP_JOURNAL_TOKEN`), else from `file`, else the store's
    /// `default_file`, made (32 random bytes, base64url) on first start as a 0600 file.
    ///
    /// # Errors
    /// An unreadable or empty token file; no randomness; a file that cannot be written.
    pub fn resolve(
        env: Option<String>,
        file: Option<&Path>,
        default_file: &Path,
    ) -> io::Result<(Token, TokenSource)> {
        if let Some(env) = env.filter(|e| !e.trim().is_empty()) {
            let token = Token::new(&env).ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "ACP_JOURNAL_TOKEN holds more than visible ASCII",
                )
            })?;
            return Ok((token, TokenSource::Environment));
        }
        let path = file.unwrap_or(default_file);
        match std::fs::read_to_string(path) {
            Ok(text) => {
                let token = Token::new(&text).ok_or_else(|| {
                    io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!(
                            "the token file {} is empty or holds more than visible ASCII",
                            path.display()
                        ),
                    )
                })?;
                Ok((token, TokenSource::File(path.to_path_buf())))
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound && file.is_none() => {
                let mut bytes = [0u8; 32];
                getrandom::fill(&mut bytes).map_err(io::Error::other)?;
                let secret = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes);
                if let Some(dir) = path.parent() {
                    crate::journal::private::create_private_dir(dir)?;
                }
                let mut out = create_private_file(path)?;
                out.write_all(secret.as_bytes())?;
                out.write_all(b"\n")?;
                out.sync_all()?;
                Ok((Token(secret), TokenSource::Generated(path.to_path_buf())))
            }
            Err(e) => Err(io::Error::new(
                e.kind(),
                format!("reading the token file {}: {e}", path.display()),
            )),
        }
    }

    /// The secret, to send (the bridge).
    pub fn secret(&self) -> &str {
        &self.0
    }

    /// True when `header` (an `Authorization` value) is `Bearer <this token>`, compared in
    /// time that depends on the lengths only.
    pub fn admits(&self, header: Option<&[u8]>) -> bool {
        let Some(header) = header else { return false };
        let Some(given) = header
            .strip_prefix(b"Bearer ")
            .or_else(|| header.strip_prefix(b"bearer "))
        else {
            return false;
        };
        self.is(given)
    }

    /// True when `given` (typed into the page's login form, or in `/?token=`; trimmed) is the
    /// token, compared in time that depends on the lengths only.
    pub fn is(&self, given: &[u8]) -> bool {
        same(given.trim_ascii(), self.0.as_bytes())
    }

    /// The value of the page's cookie: hex HMAC-SHA256 of [`COOKIE_MESSAGE`] keyed with the
    /// token. Not the token (a cookie the browser leaks does not give the bearer token away),
    /// and the same for as long as the token is.
    pub fn cookie(&self) -> String {
        let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, self.0.as_bytes());
        let tag = ring::hmac::sign(&key, COOKIE_MESSAGE);
        tag.as_ref().iter().map(|b| format!("{b:02x}")).collect()
    }

    /// True when one of `headers` (`Cookie` values: HTTP/2 may split them) holds
    /// [`COOKIE`]`=`[`Token::cookie`], compared in time that depends on the lengths only.
    pub fn admits_cookie<'a>(&self, headers: impl IntoIterator<Item = &'a [u8]>) -> bool {
        let want = self.cookie();
        let mut found = false;
        for header in headers {
            for pair in header.split(|b| *b == b';') {
                let pair = pair.trim_ascii();
                if let Some(value) = pair
                    .strip_prefix(COOKIE.as_bytes())
                    .and_then(|rest| rest.strip_prefix(b"="))
                {
                    // Every candidate is compared: no early exit on the first match.
                    found |= same(value, want.as_bytes());
                }
            }
        }
        found
    }
}

/// The name of the page's cookie.
pub const COOKIE: &str = "acp_journal";

/// What the page's cookie signs (a new version of the page's login would change it, and so
/// end the sessions of the old one).
pub const COOKIE_MESSAGE: &[u8] = b"acp-journal page v1";

/// `given == want`, in time that depends on the lengths only.
fn same(given: &[u8], want: &[u8]) -> bool {
    if given.len() != want.len() {
        return false;
    }
    given
        .iter()
        .zip(want)
        .fold(0u8, |acc, (a, b)| acc | (a ^ b))
        == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_exact_bearer_token_is_admitted() {
        let token = Token::new("s3cret").unwrap();
        assert!(token.admits(Some(b"Bearer s3cret")));
        assert!(token.admits(Some(b"bearer s3cret ")));
        for wrong in [
            &b"Bearer s3cre"[..],
            b"Bearer s3cret2",
            b"Bearer S3cret",
            b"Basic s3cret",
            b"s3cret",
            b"",
        ] {
            assert!(!token.admits(Some(wrong)), "{wrong:?}");
        }
        assert!(!token.admits(None));
    }

    #[test]
    fn the_cookie_is_an_hmac_of_the_token_and_only_it_is_admitted() {
        let token = Token::new("s3cret").unwrap();
        let cookie = token.cookie();
        assert_eq!(cookie.len(), 64);
        assert!(cookie.bytes().all(|b| b.is_ascii_hexdigit()));
        assert!(!cookie.contains("s3cret"));
        // HMAC-SHA256("s3cret", "acp-journal page v1"), as `openssl dgst -sha256 -hmac` says.
        assert_eq!(
            cookie,
            "6782c35318adc37d549cdfaa5a3c7f33ee67c3c76098593bf596879d5eb27ce9"
        );
        assert_ne!(Token::new("s3cret2").unwrap().cookie(), cookie);
        let jar = format!("theme=dark; {COOKIE}={cookie}; x=1");
        assert!(token.admits_cookie([jar.as_bytes()]));
        let split = format!("{COOKIE}={cookie}");
        assert!(token.admits_cookie([&b"theme=dark"[..], split.as_bytes()]));
        for wrong in [
            format!("{COOKIE}={}", &cookie[1..]),
            format!("{COOKIE}=s3cret"),
            format!("x{COOKIE}={cookie}"),
            format!("{COOKIE}={}", cookie.to_uppercase()),
            String::new(),
        ] {
            assert!(!token.admits_cookie([wrong.as_bytes()]), "{wrong}");
        }
        assert!(!token.admits_cookie(std::iter::empty()));
        assert!(token.is(b" s3cret\n") && !token.is(b"s3cre"));
    }

    #[test]
    fn the_environment_wins_then_the_file_then_a_generated_private_file() {
        let dir = tempfile::tempdir().unwrap();
        let default = dir.path().join("store/serve.token");
        let (t, source) = Token::resolve(Some("from-env".into()), None, &default).unwrap();
        assert_eq!((t.secret(), source), ("from-env", TokenSource::Environment));

        let (made, source) = Token::resolve(None, None, &default).unwrap();
        assert_eq!(source, TokenSource::Generated(default.clone()));
        assert_eq!(made.secret().len(), 43);
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&default).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let (again, source) = Token::resolve(Some("  ".into()), None, &default).unwrap();
        assert_eq!(source, TokenSource::File(default.clone()));
        assert_eq!(
            again.secret(),
            made.secret(),
            "the same token on the next start"
        );

        let given = dir.path().join("given");
        assert!(
            Token::resolve(None, Some(&given), &default).is_err(),
            "a missing --token-file is an error"
        );
        std::fs::write(&given, "\n").unwrap();
        assert!(
            Token::resolve(None, Some(&given), &default).is_err(),
            "an empty one too"
        );
    }
}
