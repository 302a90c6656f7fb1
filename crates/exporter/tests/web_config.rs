//! Who may read the metrics: the exporter-toolkit's web configuration (TLS with a certificate
//! made here, basic authentication with bcrypt hashes), a unix socket with the permissions
//! asked for, and a web configuration that does not read refused in one line naming the file
//! and the field.

use base64::Engine as _;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::fs::PermissionsExt as _;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::Arc;
use udamon_exporter::{Endpoint, Exporter, Listen, WebConfig};

fn endpoint(listen: Listen, web: WebConfig) -> Endpoint {
    Endpoint {
        listen,
        web,
        log: Arc::new(|_, text| eprintln!("metrics: {text}")),
    }
}

fn request(authorization: Option<(&str, &str)>) -> String {
    let auth = authorization.map_or(String::new(), |(user, password)| {
        let pair = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
        format!("Authorization: Basic {pair}\r\n")
    });
    format!("GET /metrics HTTP/1.1\r\nHost: test\r\n{auth}Connection: close\r\n\r\n")
}

fn status(response: &str) -> u16 {
    response
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP response: {response:?}"))
}

fn exchange(mut stream: impl Read + Write, text: &str) -> String {
    stream.write_all(text.as_bytes()).unwrap();
    let mut response = Vec::new();
    // A TLS peer that closes without close_notify is an error after the data: keep the data.
    let _ = stream.read_to_end(&mut response);
    String::from_utf8_lossy(&response).into_owned()
}

/// An HTTPS request to `addr`, trusting `cert` (PEM) for "localhost".
fn tls_exchange(addr: SocketAddr, cert: &str, text: &str) -> String {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject as _;
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(cert.as_bytes()).unwrap())
        .unwrap();
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    let connection =
        rustls::ClientConnection::new(Arc::new(config), "localhost".try_into().unwrap()).unwrap();
    let tcp = TcpStream::connect(addr).unwrap();
    exchange(rustls::StreamOwned::new(connection, tcp), text)
}

/// A web configuration in `dir` with TLS (a certificate for localhost made now) and the user
/// `prometheus`, password `s3cret`; returns its path and the certificate's PEM.
fn tls_and_user(dir: &Path) -> (std::path::PathBuf, String) {
    let made = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let cert = made.cert.pem();
    std::fs::write(dir.join("cert.pem"), &cert).unwrap();
    std::fs::write(dir.join("key.pem"), made.signing_key.serialize_pem()).unwrap();
    let hash = bcrypt::hash("s3cret", 4).unwrap();
    let path = dir.join("web.yml");
    // Relative paths are the configuration's directory's, as the exporter-toolkit reads them.
    std::fs::write(
        &path,
        format!(
            "tls_server_config:\n  cert_file: cert.pem\n  key_file: key.pem\n\
             basic_auth_users:\n  prometheus: {hash}\n"
        ),
    )
    .unwrap();
    (path, cert)
}

#[test]
fn a_scrape_over_tls_needs_the_user_and_password() {
    let dir = tempfile::tempdir().unwrap();
    let (path, cert) = tls_and_user(dir.path());
    let web = WebConfig::read(&path).unwrap();
    let exporter = Exporter::new();
    let server = exporter
        .serve_at(endpoint(Listen::Tcp("127.0.0.1:0".parse().unwrap()), web))
        .unwrap();
    let addr = server.local_addr().unwrap();

    let none = tls_exchange(addr, &cert, &request(None));
    assert_eq!(status(&none), 401, "{none}");
    assert!(
        none.to_ascii_lowercase()
            .contains("www-authenticate: basic"),
        "{none}"
    );
    let wrong = tls_exchange(addr, &cert, &request(Some(("prometheus", "guess"))));
    assert_eq!(status(&wrong), 401, "{wrong}");
    let stranger = tls_exchange(addr, &cert, &request(Some(("nobody", "s3cret"))));
    assert_eq!(
        status(&stranger),
        401,
        "another name with the right password: {stranger}"
    );
    for _ in 0..2 {
        // The second time, the credentials remembered.
        let right = tls_exchange(addr, &cert, &request(Some(("prometheus", "s3cret"))));
        assert_eq!(status(&right), 200, "{right}");
        assert!(right.contains("udamon_targets"), "{right}");
    }

    // Plain HTTP to the TLS endpoint reads no metrics.
    let plain = exchange(
        TcpStream::connect(addr).unwrap(),
        &request(Some(("prometheus", "s3cret"))),
    );
    assert!(!plain.contains("udamon_targets"), "{plain}");
}

#[test]
fn the_unix_socket_has_the_mode_asked_for_and_is_removed_at_the_end() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("metrics.sock");
    // A stale socket of a server gone is replaced.
    drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
    let exporter = Exporter::new();
    let listen = Listen::Unix {
        path: path.clone(),
        mode: 0o660,
    };
    let server = exporter
        .serve_at(endpoint(listen.clone(), WebConfig::default()))
        .unwrap();
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o660);
    let response = exchange(UnixStream::connect(&path).unwrap(), &request(None));
    assert_eq!(status(&response), 200, "{response}");

    let again = exporter
        .serve_at(endpoint(listen.clone(), WebConfig::default()))
        .err()
        .expect("a live socket is not taken over");
    assert!(again.to_string().contains("already answers"), "{again}");
    drop(server);
    assert!(!path.exists(), "the socket goes with the server");

    let file = dir.path().join("file");
    std::fs::write(&file, "keep").unwrap();
    let e = exporter
        .serve_at(endpoint(
            Listen::Unix {
                path: file.clone(),
                mode: 0o600,
            },
            WebConfig::default(),
        ))
        .err()
        .expect("a file is not replaced by the socket");
    assert!(e.to_string().contains("not a socket"), "{e}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "keep");
}

#[test]
fn a_web_configuration_that_does_not_read_names_its_file_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("web.yml");
    let refused = |text: &str| {
        std::fs::write(&path, text).unwrap();
        let e = WebConfig::read(&path)
            .err()
            .unwrap_or_else(|| panic!("{text:?} was taken"));
        assert!(!e.contains('\n'), "one line: {e}");
        assert!(e.starts_with(&path.display().to_string()), "{e}");
        e
    };
    let e = refused("basic_auth_users:\n  alice: plaintext\n");
    assert!(
        e.contains("basic_auth_users.alice") && e.contains("bcrypt"),
        "{e}"
    );
    let e = refused("tls_server_config:\n  cert_file: c.pem\n");
    assert!(e.contains("tls_server_config.key_file: missing"), "{e}");
    let e = refused("tls_server_config:\n  cert_file: none.pem\n  key_file: none.pem\n");
    assert!(
        e.contains("tls_server_config.cert_file") && e.contains("none.pem"),
        "{e}"
    );
    let e = refused("tls_server_config:\n  client_ca_file: ca.pem\n");
    assert!(
        e.contains("client_ca_file"),
        "an unknown field is named: {e}"
    );
    let e = refused("basic_auth_user:\n  alice: x\n");
    assert!(e.contains("basic_auth_user"), "{e}");

    // A key that is not the certificate's.
    let (good, _) = tls_and_user(dir.path());
    let other = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    std::fs::write(
        dir.path().join("key.pem"),
        other.signing_key.serialize_pem(),
    )
    .unwrap();
    let e = WebConfig::read(&good)
        .err()
        .expect("a key of another certificate");
    assert!(e.contains("tls_server_config.key_file"), "{e}");
}
