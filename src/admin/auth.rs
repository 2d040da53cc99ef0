//! The admin token: `Authorization: Bearer TOKEN` on every write when a token is configured.
//!
//! Tokens are compared in constant time, and on their SHA-256 digests rather than their
//! bytes, so that neither the position of the first wrong byte nor the token's length shows
//! in the response time. `subtle` does the comparison: a hand-written XOR fold is as short,
//! but an optimiser is free to turn it into an early exit; `subtle` puts a barrier in the way.
//!
//! A token file that other users can read is worth a warning ([`Token::readable_by_others`]),
//! not a refusal: Kubernetes mounts secrets with mode 0644 unless told otherwise.

use super::AdminState;
use super::error::ApiError;
use axum::extract::FromRequestParts;
use axum::http::header;
use axum::http::request::Parts;
use sha2::{Digest, Sha256};
use std::fmt;
use std::path::{Path, PathBuf};
use subtle::ConstantTimeEq;

/// The environment variable that holds the token when `--token-file` is not given.
pub const TOKEN_ENV: &str = "REBOUND_ADMIN_TOKEN";

/// The configured admin token (only its digest is kept).
#[derive(Clone)]
pub struct Token {
    digest: [u8; 32],
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Token(<redacted>)")
    }
}

/// Why a token could not be had.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    /// The token file could not be read.
    #[error("cannot read the token file {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The token is empty or has inner whitespace.
    #[error("the admin token from {0} is empty or contains whitespace")]
    Invalid(String),
}

impl Token {
    /// A token from its text; surrounding whitespace (a trailing newline) is dropped.
    pub fn new(secret: &str, from: &str) -> Result<Token, TokenError> {
        let secret = secret.trim();
        if secret.is_empty() || secret.chars().any(char::is_whitespace) {
            return Err(TokenError::Invalid(from.to_string()));
        }
        Ok(Token {
            digest: Sha256::digest(secret.as_bytes()).into(),
        })
    }

    /// The token from `--token-file`, else from `REBOUND_ADMIN_TOKEN` (an empty variable
    /// counts as unset), else none.
    pub fn configured(file: Option<&Path>) -> Result<Option<Token>, TokenError> {
        if let Some(path) = file {
            let text = std::fs::read_to_string(path).map_err(|source| TokenError::Read {
                path: path.display().to_string(),
                source,
            })?;
            return Token::new(&text, &path.display().to_string()).map(Some);
        }
        match std::env::var(TOKEN_ENV) {
            Ok(v) if !v.trim().is_empty() => Token::new(&v, TOKEN_ENV).map(Some),
            _ => Ok(None),
        }
    }

    /// Whether users other than its owner can read the token `file`: its group or everyone
    /// (unix only; elsewhere, and when the file cannot be looked at, `None`).
    ///
    /// ```
    /// # #[cfg(unix)] {
    /// use rebound::admin::auth::Token;
    /// use std::os::unix::fs::PermissionsExt;
    ///
    /// let dir = tempfile::tempdir().unwrap();
    /// let file = dir.path().join("token");
    /// std::fs::write(&file, "s3cret\n").unwrap();
    /// std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    /// let exposed = Token::readable_by_others(&file).unwrap();
    /// assert_eq!(exposed.mode, 0o644);
    /// assert!(exposed.to_string().contains("readable by others (mode 0644); chmod 600 it"));
    ///
    /// std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    /// assert!(Token::readable_by_others(&file).is_none());
    /// # }
    /// ```
    pub fn readable_by_others(file: &Path) -> Option<ReadableByOthers> {
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            // Through a symlink, as a Kubernetes secret's `token -> ..data/token`.
            let mode = std::fs::metadata(file).ok()?.permissions().mode() & 0o7777;
            (mode & 0o044 != 0).then(|| ReadableByOthers {
                path: file.to_path_buf(),
                mode,
            })
        }
        #[cfg(not(unix))]
        {
            let _ = file;
            None
        }
    }

    /// Whether `presented` is this token, in constant time.
    pub fn verify(&self, presented: &str) -> bool {
        let digest: [u8; 32] = Sha256::digest(presented.as_bytes()).into();
        digest.ct_eq(&self.digest).into()
    }
}

/// A token file that its group or everyone can read; shown as the warning to give.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadableByOthers {
    /// The token file.
    pub path: PathBuf,
    /// Its permission bits (`0o644`).
    pub mode: u32,
}

impl fmt::Display for ReadableByOthers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let who = if self.mode & 0o004 != 0 {
            "others"
        } else {
            "its group"
        };
        write!(
            f,
            "token file {} is readable by {who} (mode {:04o}); chmod 600 it",
            self.path.display(),
            self.mode
        )
    }
}

/// Proof that a write request may go on: the token matched, or none is configured.
///
/// Put it first among a handler's arguments, so that it runs before the body is read.
#[derive(Debug)]
pub struct Writer;

impl FromRequestParts<AdminState> for Writer {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AdminState) -> Result<Self, ApiError> {
        let Some(token) = &state.token else {
            return Ok(Writer);
        };
        let Some(value) = parts.headers.get(header::AUTHORIZATION) else {
            return Err(ApiError::unauthorized(
                "this write needs 'Authorization: Bearer TOKEN'",
            ));
        };
        let presented = value
            .to_str()
            .ok()
            .and_then(|v| v.split_once(' '))
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
            .map(|(_, t)| t.trim());
        match presented {
            Some(t) if token.verify(t) => Ok(Writer),
            Some(_) => Err(ApiError::unauthorized("the bearer token is wrong")),
            None => Err(ApiError::unauthorized(
                "the Authorization header must be 'Bearer TOKEN'",
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_same_token_verifies() {
        let t = Token::new("s3cret\n", "test").unwrap();
        assert!(t.verify("s3cret"));
        assert!(!t.verify("s3cre"));
        assert!(!t.verify("s3cret "));
        assert!(!t.verify(""));
        assert!(Token::new("  \n", "test").is_err());
        assert!(Token::new("two words", "test").is_err());
        assert_eq!(format!("{t:?}"), "Token(<redacted>)");
    }

    #[cfg(unix)]
    #[test]
    fn a_token_file_readable_by_its_group_or_everyone_is_told_apart() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("token");
        std::fs::write(&file, "s3cret\n").unwrap();
        let with_mode = |mode| {
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(mode)).unwrap();
            Token::readable_by_others(&file).map(|e| e.to_string())
        };
        let path = file.display();
        assert_eq!(
            with_mode(0o640),
            Some(format!(
                "token file {path} is readable by its group (mode 0640); chmod 600 it"
            ))
        );
        assert_eq!(
            with_mode(0o604),
            Some(format!(
                "token file {path} is readable by others (mode 0604); chmod 600 it"
            ))
        );
        assert_eq!(with_mode(0o600), None);
        assert_eq!(with_mode(0o400), None);
        assert!(Token::readable_by_others(&dir.path().join("missing")).is_none());
    }
}
