use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// Names one conversation, such as `cli:default` or `agent:main:telegram:dm:42`.
///
/// A key is also a file name (`sessions/<key>.jsonl`), so it is restricted to characters that
/// are safe in a path component on every platform nanocrab runs on: ASCII letters, digits and
/// `: _ - . @ +`, with no leading dot.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct SessionKey(String);

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SessionKeyError {
    #[error("session key is empty")]
    Empty,
    #[error("session key {key:?} is longer than {max} characters")]
    TooLong { key: String, max: usize },
    #[error(
        "session key {key:?} contains {found:?}; use letters, digits and ': _ - . @ +' (not starting with '.')"
    )]
    BadChar { key: String, found: char },
}

impl SessionKey {
    const MAX_LEN: usize = 200;

    pub fn parse(key: &str) -> Result<Self, SessionKeyError> {
        if key.is_empty() {
            return Err(SessionKeyError::Empty);
        }
        if key.len() > Self::MAX_LEN {
            return Err(SessionKeyError::TooLong {
                key: key.to_owned(),
                max: Self::MAX_LEN,
            });
        }
        if let Some(found) = key.chars().find(|c| {
            !(c.is_ascii_alphanumeric() || matches!(c, ':' | '_' | '-' | '.' | '@' | '+'))
        }) {
            return Err(SessionKeyError::BadChar {
                key: key.to_owned(),
                found,
            });
        }
        if key.starts_with('.') {
            return Err(SessionKeyError::BadChar {
                key: key.to_owned(),
                found: '.',
            });
        }
        Ok(Self(key.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for SessionKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl FromStr for SessionKey {
    type Err = SessionKeyError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl TryFrom<String> for SessionKey {
    type Error = SessionKeyError;

    fn try_from(value: String) -> Result<Self, Self::Error> {
        Self::parse(&value)
    }
}

impl From<SessionKey> for String {
    fn from(key: SessionKey) -> Self {
        key.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn accepts_channel_and_agent_keys() {
        for key in ["cli:default", "agent:main:telegram:dm:42", "a.b@c+d_e-f"] {
            assert_eq!(
                SessionKey::parse(key).map(|k| k.to_string()),
                Ok(key.to_owned())
            );
        }
    }

    #[test]
    fn rejects_path_tricks() {
        assert_eq!(
            SessionKey::parse("../etc/passwd"),
            Err(SessionKeyError::BadChar {
                key: "../etc/passwd".into(),
                found: '/'
            })
        );
        assert_eq!(
            SessionKey::parse(".hidden"),
            Err(SessionKeyError::BadChar {
                key: ".hidden".into(),
                found: '.'
            })
        );
        assert_eq!(SessionKey::parse(""), Err(SessionKeyError::Empty));
    }
}
