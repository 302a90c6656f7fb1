//! Who may read the metrics, as Prometheus's exporters say it: the web configuration file of
//! the exporter-toolkit (`--web.config.file`), YAML with `tls_server_config` (`cert_file`,
//! `key_file`: HTTPS) and `basic_auth_users` (user names and their bcrypt hashes). Other keys
//! of the toolkit's file are refused by name rather than ignored: a setting an operator
//! believes in force must be.
//!
//! A bcrypt check costs tens of milliseconds of CPU by design, and any local user can send
//! passwords: checks run one at a time off the server's thread, and credentials that passed
//! are remembered (a few), so that a scraper's every scrape costs one comparison.

use base64::Engine as _;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// The largest web configuration read: a few users and two paths take a few hundred bytes.
const MAX_FILE_BYTES: u64 = 1 << 20;

/// Credentials remembered after a bcrypt check passed.
const REMEMBERED: usize = 16;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    tls_server_config: Option<TlsFile>,
    #[serde(default)]
    basic_auth_users: BTreeMap<String, String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct TlsFile {
    cert_file: Option<PathBuf>,
    key_file: Option<PathBuf>,
}

/// What the endpoint asks of a client: TLS, a user and password, both or neither.
#[derive(Clone, Default)]
pub struct WebConfig {
    tls: Option<Arc<rustls::ServerConfig>>,
    /// `None`: anyone may read.
    users: Option<Arc<Users>>,
}

struct Users {
    hashes: BTreeMap<String, String>,
    /// `Authorization` header values that passed a check, newest last.
    passed: Mutex<Vec<String>>,
    /// One bcrypt check at a time.
    checking: tokio::sync::Semaphore,
}

impl WebConfig {
    /// Reads the web configuration at `path`; an error is one line naming the file and the
    /// field. Relative certificate paths are taken from the file's directory, as the
    /// exporter-toolkit does.
    pub fn read(path: &Path) -> Result<WebConfig, String> {
        let at = |what: &str, why: String| format!("{}: {what}{why}", path.display());
        let text = read_small(path).map_err(|e| at("", format!("cannot read it: {e}")))?;
        let file: File = serde_yaml::from_str(&text).map_err(|e| {
            let line = e
                .location()
                .map_or(String::new(), |l| format!(" (line {})", l.line()));
            at("", format!("{e}{line}"))
        })?;
        let dir = path.parent().unwrap_or(Path::new("."));
        let tls = match file.tls_server_config {
            None => None,
            Some(tls) => {
                let field = |name: &str, value: Option<PathBuf>| {
                    value.map(|p| dir.join(p)).ok_or_else(|| {
                        at(
                            &format!("tls_server_config.{name}"),
                            ": missing (TLS needs cert_file and key_file)".to_string(),
                        )
                    })
                };
                let (cert, key) = (
                    field("cert_file", tls.cert_file)?,
                    field("key_file", tls.key_file)?,
                );
                Some(Arc::new(tls_config(&cert, &key).map_err(
                    |(name, why)| at(&format!("tls_server_config.{name}"), format!(": {why}")),
                )?))
            }
        };
        for (user, hash) in &file.basic_auth_users {
            if hash.parse::<bcrypt::HashParts>().is_err() {
                return Err(at(
                    &format!("basic_auth_users.{user}"),
                    ": not a bcrypt hash; make one with `htpasswd -nBC 10 USER`".to_string(),
                ));
            }
        }
        Ok(WebConfig {
            tls,
            users: (!file.basic_auth_users.is_empty()).then(|| {
                Arc::new(Users {
                    hashes: file.basic_auth_users,
                    passed: Mutex::default(),
                    checking: tokio::sync::Semaphore::new(1),
                })
            }),
        })
    }

    /// Whether clients speak TLS.
    pub fn tls(&self) -> Option<&Arc<rustls::ServerConfig>> {
        self.tls.as_ref()
    }

    /// Whether clients must give a user and password.
    pub fn asks_password(&self) -> bool {
        self.users.is_some()
    }

    /// Whether a request with this `Authorization` header value may read the metrics.
    pub(crate) async fn allows(&self, authorization: Option<&[u8]>) -> bool {
        let Some(users) = &self.users else {
            return true;
        };
        let Some(header) = authorization.and_then(|h| std::str::from_utf8(h).ok()) else {
            return false;
        };
        if remembered(&lock(&users.passed), header) {
            return true;
        }
        let Some((user, password)) = basic_credentials(header) else {
            return false;
        };
        let Ok(_permit) = users.checking.acquire().await else {
            return false;
        };
        // A user who does not exist costs the same check as one who does: the time taken
        // does not say which names are users.
        // (Another user's hash, which this password is not taken for even if it matches.)
        let known = users.hashes.contains_key(&user);
        let hash = match users.hashes.get(&user) {
            Some(hash) => hash.clone(),
            None => users.hashes.values().next().cloned().unwrap_or_default(),
        };
        let passed = tokio::task::spawn_blocking(move || bcrypt::verify(password, &hash))
            .await
            .is_ok_and(|r| r.unwrap_or(false))
            && known;
        if passed {
            let mut remembered = lock(&users.passed);
            if remembered.len() >= REMEMBERED {
                remembered.remove(0);
            }
            remembered.push(header.to_string());
        }
        passed
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether `header` is among those that passed, compared in time independent of where they
/// differ.
fn remembered(passed: &[String], header: &str) -> bool {
    passed.iter().fold(false, |found, p| {
        let same = p.len() == header.len()
            && p.bytes()
                .zip(header.bytes())
                .fold(0u8, |diff, (a, b)| diff | (a ^ b))
                == 0;
        found | same
    })
}

/// The user and password of a `Basic` authorization.
fn basic_credentials(header: &str) -> Option<(String, String)> {
    let (scheme, encoded) = header.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .ok()?;
    let (user, password) = std::str::from_utf8(&decoded).ok()?.split_once(':')?;
    Some((user.to_string(), password.to_string()))
}

fn read_small(path: &Path) -> std::io::Result<String> {
    use std::io::Read as _;
    let mut text = String::new();
    std::fs::File::open(path)?
        .take(MAX_FILE_BYTES)
        .read_to_string(&mut text)?;
    Ok(text)
}

/// The TLS server configuration of a certificate chain and its key, both PEM; an error names
/// the field at fault.
fn tls_config(cert: &Path, key: &Path) -> Result<rustls::ServerConfig, (&'static str, String)> {
    use rustls::pki_types::pem::PemObject as _;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let shown = |p: &Path, e: &dyn std::fmt::Display| format!("{}: {e}", p.display());
    let chain = CertificateDer::pem_file_iter(cert)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| ("cert_file", shown(cert, &e)))?;
    if chain.is_empty() {
        return Err(("cert_file", shown(cert, &"no PEM certificate in it")));
    }
    let key_der = PrivateKeyDer::from_pem_file(key).map_err(|e| ("key_file", shown(key, &e)))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| ("cert_file", e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(chain, key_der)
        .map_err(|e| ("key_file", format!("does not go with the certificate: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basic_credentials_are_read_from_the_header() {
        let header = format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode("alice:se:cret")
        );
        assert_eq!(
            basic_credentials(&header),
            Some(("alice".to_string(), "se:cret".to_string()))
        );
        assert_eq!(basic_credentials("Bearer abc"), None);
        assert_eq!(basic_credentials("Basic !!!"), None);
    }

    #[test]
    fn only_a_remembered_header_matches() {
        let passed = vec!["Basic abc".to_string(), "Basic abd".to_string()];
        assert!(remembered(&passed, "Basic abd"));
        assert!(!remembered(&passed, "Basic ab"));
        assert!(!remembered(&passed, "Basic abe"));
    }
}
