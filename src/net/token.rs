//! The bearer token every request to `acp-journal serve` must carry.

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
        let want = self.0.as_bytes();
        let given = given.trim_ascii();
        if given.len() != want.len() {
            return false;
        }
        given
            .iter()
            .zip(want)
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
    }
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
