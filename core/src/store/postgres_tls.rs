//! TLS to PostgreSQL (rustls), chosen by libpq's `sslmode` and `sslrootcert` URL parameters.
//!
//! The modes mean what they mean to libpq
//! (<https://www.postgresql.org/docs/current/libpq-ssl.html#LIBPQ-SSL-PROTECTION>):
//!
//! | `sslmode` | encrypted | certificate checked |
//! |---|---|---|
//! | `disable` | never | - |
//! | `prefer` (the default) | when the server offers TLS | no |
//! | `require` | always | no; as `verify-ca` when `sslrootcert` is given |
//! | `verify-ca` | always | chain to a trusted root |
//! | `verify-full` | always | chain to a trusted root, and the host name |
//!
//! The roots are the PEM file `sslrootcert` names, or the system's (`sslrootcert=system`, and the
//! default of the verifying modes). libpq's `allow` and client certificates (`sslcert`,
//! `sslkey`) are refused with a clear error rather than ignored.

use std::sync::Arc;

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, RootCertStore, SignatureScheme};
use tokio_postgres::config::SslMode;
use tokio_postgres_rustls::MakeRustlsConnect;

use super::StoreError;

/// How a connection protects itself, from the URL's `sslmode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Disable,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

/// A PostgreSQL URL split into what tokio-postgres parses and the TLS connector its `sslmode`
/// and `sslrootcert` ask for.
pub(super) struct Connection {
    /// The connection settings, `ssl_mode` included.
    pub(super) config: tokio_postgres::Config,
    /// The connector every connection (pooled and `LISTEN`) uses.
    pub(super) tls: MakeRustlsConnect,
}

/// Parses `url` (`postgres://user:pass@host:port/db?sslmode=...&sslrootcert=...`). The TLS
/// parameters are taken out before tokio-postgres parses the rest, since it knows neither
/// `verify-ca`, `verify-full` nor `sslrootcert`.
pub(super) fn parse(url: &str) -> Result<Connection, StoreError> {
    let invalid = |why: String| StoreError::InvalidUrl(format!("{}: {why}", redact(url)));
    let (base, query) = url.split_once('?').unwrap_or((url, ""));
    let mut mode = Mode::Prefer;
    let mut root_file: Option<String> = None;
    let mut rest = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        match key {
            "sslmode" => {
                mode = match value {
                    "disable" => Mode::Disable,
                    "prefer" => Mode::Prefer,
                    "require" => Mode::Require,
                    "verify-ca" => Mode::VerifyCa,
                    "verify-full" => Mode::VerifyFull,
                    other => {
                        return Err(invalid(format!(
                            "sslmode {other:?} is not one of disable, prefer, require, verify-ca, verify-full"
                        )));
                    }
                };
            }
            "sslrootcert" => root_file = Some(percent_decode(value).map_err(invalid)?),
            "sslcert" | "sslkey" | "sslpassword" => {
                return Err(invalid(format!("{key}: client certificates are not supported")));
            }
            _ => rest.push(pair),
        }
    }
    let url = if rest.is_empty() { base.to_owned() } else { format!("{base}?{}", rest.join("&")) };
    let mut config: tokio_postgres::Config = url.parse().map_err(|e: tokio_postgres::Error| invalid(e.to_string()))?;
    // With a root file, libpq's `require` verifies the chain as `verify-ca` does.
    if mode == Mode::Require && root_file.as_deref().is_some_and(|f| f != "system") {
        mode = Mode::VerifyCa;
    }
    config.ssl_mode(match mode {
        Mode::Disable => SslMode::Disable,
        Mode::Prefer => SslMode::Prefer,
        Mode::Require | Mode::VerifyCa | Mode::VerifyFull => SslMode::Require,
    });
    let tls = connector(mode, root_file.as_deref()).map_err(invalid)?;
    Ok(Connection { config, tls })
}

/// The URL with its password replaced, for error messages.
fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else { return url.to_owned() };
    let Some((userinfo, host)) = rest.split_once('@') else { return url.to_owned() };
    match userinfo.split_once(':') {
        Some((user, _)) => format!("{scheme}://{user}:***@{host}"),
        None => url.to_owned(),
    }
}

fn percent_decode(value: &str) -> Result<String, String> {
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok());
            let byte = hex.and_then(|h| u8::from_str_radix(h, 16).ok()).ok_or("malformed %-escape in sslrootcert")?;
            out.push(byte);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| "sslrootcert is not UTF-8".to_owned())
}

fn provider() -> Arc<CryptoProvider> {
    // Named explicitly: the build may carry more than one rustls provider (reqwest brings aws-lc-rs).
    Arc::new(rustls::crypto::aws_lc_rs::default_provider())
}

fn roots(file: Option<&str>) -> Result<RootCertStore, String> {
    let mut store = RootCertStore::empty();
    match file {
        None | Some("system") => {
            let found = rustls_native_certs::load_native_certs();
            let (added, _) = store.add_parsable_certificates(found.certs);
            if added == 0 {
                return Err("no system root certificates were found; name a PEM file with sslrootcert".to_owned());
            }
        }
        Some(path) => {
            let certs = CertificateDer::pem_file_iter(path)
                .map_err(|e| format!("sslrootcert {path}: {e}"))?
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| format!("sslrootcert {path}: {e}"))?;
            let (added, _) = store.add_parsable_certificates(certs);
            if added == 0 {
                return Err(format!("sslrootcert {path} holds no certificate"));
            }
        }
    }
    Ok(store)
}

fn connector(mode: Mode, root_file: Option<&str>) -> Result<MakeRustlsConnect, String> {
    let provider = provider();
    let verifier: Arc<dyn ServerCertVerifier> = match mode {
        Mode::Disable | Mode::Prefer | Mode::Require => {
            Arc::new(Relaxed { chain: None, provider: Arc::clone(&provider) })
        }
        Mode::VerifyCa | Mode::VerifyFull => {
            let webpki =
                WebPkiServerVerifier::builder_with_provider(Arc::new(roots(root_file)?), Arc::clone(&provider))
                    .build()
                    .map_err(|e| e.to_string())?;
            if mode == Mode::VerifyCa {
                Arc::new(Relaxed { chain: Some(webpki), provider: Arc::clone(&provider) })
            } else {
                webpki
            }
        }
    };
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth();
    Ok(MakeRustlsConnect::new(config))
}

/// The modes that check less than rustls would: `prefer` and `require` without a root file
/// (`chain: None`: encrypted, the certificate not checked) and `verify-ca` (`chain: Some`: the
/// chain must reach a trusted root; the name in the certificate may differ from the host
/// connected to), as libpq means them. The handshake signatures are checked either way, so the
/// session key belongs to whoever holds the presented certificate's key.
#[derive(Debug)]
struct Relaxed {
    chain: Option<Arc<WebPkiServerVerifier>>,
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for Relaxed {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let Some(chain) = &self.chain else { return Ok(ServerCertVerified::assertion()) };
        // webpki checks the chain before the name, so a name error means the chain was trusted.
        match chain.verify_server_cert(end_entity, intermediates, server_name, ocsp, now) {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_and_refusals() {
        let c = parse("postgres://u@127.0.0.1:5432/db").unwrap();
        assert_eq!(c.config.get_ssl_mode(), SslMode::Prefer);
        let c = parse("postgres://u@127.0.0.1/db?sslmode=disable&connect_timeout=3").unwrap();
        assert_eq!(c.config.get_ssl_mode(), SslMode::Disable);
        assert_eq!(c.config.get_connect_timeout(), Some(&std::time::Duration::from_secs(3)));
        let c = parse("postgres://u@127.0.0.1/db?sslmode=require").unwrap();
        assert_eq!(c.config.get_ssl_mode(), SslMode::Require);
        for (url, says) in [
            ("postgres://u:secret@h/db?sslmode=allow", "sslmode \"allow\" is not one of"),
            ("postgres://u:secret@h/db?sslcert=/c.pem", "client certificates are not supported"),
            (
                "postgres://u:secret@h/db?sslmode=verify-ca&sslrootcert=/nonexistent/ca.pem",
                "sslrootcert /nonexistent/ca.pem",
            ),
            ("postgres://u:secret@h/db?sslrootcert=%zz", "malformed %-escape"),
        ] {
            let message = parse(url).err().map(|e| e.to_string()).unwrap_or_default();
            assert!(message.contains(says), "{url}: {message}");
            assert!(!message.contains("secret"), "the password leaked: {message}");
        }
    }

    #[test]
    fn redacts_the_password_only() {
        assert_eq!(redact("postgres://u:pw@h:1/d"), "postgres://u:***@h:1/d");
        assert_eq!(redact("postgres://u@h/d"), "postgres://u@h/d");
        assert_eq!(redact("host=h user=u"), "host=h user=u");
    }
}
