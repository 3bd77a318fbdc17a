//! The bearer token every request to `acp-journal serve` must carry: where it comes from, what
//! a request shows of it (the `Authorization` header, or for a browser's WebSocket, which cannot
//! set that header, a `Sec-WebSocket-Protocol` value), and how it is compared.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use base64::Engine;

use crate::journal::private::create_private_file;

/// A secret, compared by its SHA-256 digest in constant time: the time a comparison takes
/// tells neither where a guess went wrong nor the token's length.
#[derive(Clone)]
pub struct Token(String, Digest);

/// A SHA-256 digest.
type Digest = [u8; 32];

fn digest(bytes: &[u8]) -> Digest {
    use sha2::Digest as _;
    sha2::Sha256::digest(bytes).into()
}

/// Where the token came from (said in the log, never the token itself).
#[derive(Debug, PartialEq, Eq)]
pub enum TokenSource {
    /// `ACP_JOURNAL_TOKEN`.
    Environment,
    /// `--token-file` (or the journal directory's, read again).
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
        fits.then(|| Token(secret.to_string(), digest(secret.as_bytes())))
    }

    /// The token: from `env` (`ACP_JOURNAL_TOKEN`), else from `file`, else the journal
    /// directory's `default_file`, made (32 random bytes, base64url) on first start as a 0600 file.
    ///
    /// # Errors
    /// An unreadable or empty token file, or one that group or others may read (as ssh refuses
    /// an open private key); no randomness; a file that cannot be written.
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
                refuse_unprotected(path)?;
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
                let digest = digest(secret.as_bytes());
                Ok((
                    Token(secret, digest),
                    TokenSource::Generated(path.to_path_buf()),
                ))
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

    /// Refuse a token too short to withstand guessing (`serve` takes none shorter than
    /// [`MIN_LEN`] characters).
    ///
    /// # Errors
    /// A token shorter than [`MIN_LEN`].
    pub fn ensure_long(&self) -> io::Result<()> {
        if self.0.len() >= MIN_LEN {
            return Ok(());
        }
        Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "the token is {} characters long: serve takes none shorter than {MIN_LEN} (delete serve.token in the journal directory and unset ACP_JOURNAL_TOKEN to have one made)",
                self.0.len()
            ),
        ))
    }

    /// True when `given` (from [`presented`]; trimmed) is the token: their SHA-256 digests
    /// compared in constant time (the time depends on `given`'s length only, never on the
    /// token's).
    pub fn is(&self, given: &[u8]) -> bool {
        same(&digest(given.trim_ascii()), &self.1)
    }

    /// The `Sec-WebSocket-Protocol` value that carries this token ([`BEARER_PROTOCOL`] and
    /// the token in base64url), as the page offers it.
    pub fn protocol(&self) -> String {
        let encoded = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(self.0.as_bytes());
        format!("{BEARER_PROTOCOL}{encoded}")
    }
}

/// The shortest token `serve` takes.
pub const MIN_LEN: usize = 16;

/// The WebSocket subprotocol the page asks for (and the server picks: never the one carrying
/// the token, which is not echoed).
pub const PROTOCOL: &str = "acp-journal";

/// The prefix of the subprotocol value that carries the token, base64url without padding
/// (a subprotocol is an HTTP token: no `/`, `=` or `+`).
pub const BEARER_PROTOCOL: &str = "acp-journal.bearer.";

/// The token a request shows, if any: `authorization` (`Bearer …`, the scheme in any case), else
/// among `protocols` (`Sec-WebSocket-Protocol` values, comma-separated lists) a
/// [`BEARER_PROTOCOL`] one. Nothing is compared here.
pub fn presented<'a>(
    authorization: Option<&[u8]>,
    protocols: impl IntoIterator<Item = &'a [u8]>,
) -> Option<Vec<u8>> {
    if let Some(header) = authorization {
        let (scheme, rest) = header.split_at(header.len().min(7));
        return scheme
            .eq_ignore_ascii_case(b"bearer ")
            .then(|| rest.to_vec())
            .or(Some(Vec::new()));
    }
    protocols
        .into_iter()
        .flat_map(|value| value.split(|b| *b == b','))
        .find_map(|p| p.trim_ascii().strip_prefix(BEARER_PROTOCOL.as_bytes()))
        .map(|encoded| {
            base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(encoded)
                // Not base64url: shown, and wrong.
                .unwrap_or_default()
        })
}

/// Refuse a token file that group or others may read or write.
fn refuse_unprotected(path: &Path) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(path)?.permissions().mode();
    if mode & 0o077 == 0 {
        return Ok(());
    }
    Err(io::Error::new(
        io::ErrorKind::PermissionDenied,
        format!(
            "UNPROTECTED TOKEN FILE: {} has mode {:04o}: a token others can read is not a secret; `chmod 600` it",
            path.display(),
            mode & 0o7777
        ),
    ))
}

/// `given == want`, every byte compared whatever the first difference.
fn same(given: &Digest, want: &Digest) -> bool {
    let differ = given
        .iter()
        .zip(want)
        .fold(0u8, |acc, (a, b)| acc | (a ^ b));
    std::hint::black_box(differ) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_is_shown_by_its_bearer_header_or_its_subprotocol_and_compared_exactly() {
        let token = Token::new("s3cret-0123456789").unwrap();
        let shown = |h: &[u8]| presented(Some(h), []).unwrap();
        assert!(token.is(&shown(b"Bearer s3cret-0123456789")));
        assert!(token.is(&shown(b"bEARER s3cret-0123456789 ")));
        for wrong in [
            &b"Bearer s3cret-012345678"[..],
            b"Bearer s3cret-01234567890",
            b"Bearer S3cret-0123456789",
            b"Basic s3cret-0123456789",
            b"s3cret-0123456789",
            b"Bearer",
            b"",
        ] {
            assert!(!token.is(&shown(wrong)), "{wrong:?}");
        }
        assert_eq!(presented(None, []), None, "nothing shown");

        let protocol = token.protocol();
        assert!(!protocol.contains("s3cret"), "encoded: {protocol}");
        assert!(
            protocol
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
        );
        let offered = format!("{PROTOCOL}, {protocol}");
        assert!(token.is(&presented(None, [offered.as_bytes()]).unwrap()));
        let split = [PROTOCOL.as_bytes(), protocol.as_bytes()];
        assert!(
            token.is(&presented(None, split).unwrap()),
            "HTTP/2 may split it"
        );
        assert_eq!(presented(None, [PROTOCOL.as_bytes()]), None);
        let garbage = format!("{BEARER_PROTOCOL}!!");
        assert!(!token.is(&presented(None, [garbage.as_bytes()]).unwrap()));
        let other = Token::new("s3cret-0123456780").unwrap().protocol();
        assert!(!token.is(&presented(None, [other.as_bytes()]).unwrap()));
        // The header wins: a browser cannot set it, a client that does means it.
        assert!(!token.is(&presented(Some(b"Bearer x"), [offered.as_bytes()]).unwrap()));
    }

    #[test]
    fn short_tokens_and_open_token_files_are_refused() {
        assert!(Token::new("x").unwrap().ensure_long().is_err());
        assert!(
            Token::new("0123456789abcde")
                .unwrap()
                .ensure_long()
                .is_err()
        );
        assert!(
            Token::new("0123456789abcdef")
                .unwrap()
                .ensure_long()
                .is_ok()
        );

        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("token");
        std::fs::write(&file, "0123456789abcdef\n").unwrap();
        for (mode, ok) in [
            (0o600, true),
            (0o400, true),
            (0o640, false),
            (0o604, false),
            (0o622, false),
        ] {
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(mode)).unwrap();
            let result = Token::resolve(None, Some(&file), &file);
            assert_eq!(result.is_ok(), ok, "{mode:o}");
            if let Err(e) = result {
                assert!(e.to_string().contains("UNPROTECTED TOKEN FILE"), "{e}");
            }
        }
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
