//! TLS (rustls): the process's one crypto provider ([`crypto_provider`]), `serve`'s server
//! configuration from PEM files ([`server_config`]) and the bridge's client configuration, which
//! trusts the system's roots and a CA file ([`client_config`]).

use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use rustls::DigitallySignedStruct;
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::server::ParsedCertificate;

/// The crypto provider of every TLS client and server in the process (`serve`, the bridge, the
/// OTLP exporter, the object store's client): ring, the one crypto library linked, installed as
/// the process default by the first call (`main` makes it before anything else). The object
/// store's HTTP client (reqwest, built without a provider of its own) takes that default, and
/// panics when it finds none.
pub fn crypto_provider() -> Arc<CryptoProvider> {
    if let Some(provider) = CryptoProvider::get_default() {
        return provider.clone();
    }
    // Another thread may install it between the two calls: then that one is the default.
    let _ = rustls::crypto::ring::default_provider().install_default();
    CryptoProvider::get_default()
        .expect("a default crypto provider was just installed")
        .clone()
}

/// A server configuration from `cert` (the chain, leaf first) and `key`, offering HTTP/2 and
/// HTTP/1.1 by ALPN.
///
/// # Errors
/// Unreadable files, no certificate or key in them, a key that does not fit the certificate.
pub fn server_config(cert: &Path, key: &Path) -> anyhow::Result<Arc<rustls::ServerConfig>> {
    let chain = certificates(cert, "the certificate")?;
    let key = PrivateKeyDer::from_pem_file(key)
        .with_context(|| format!("reading the private key {}", key.display()))?;
    let mut config = rustls::ServerConfig::builder_with_provider(crypto_provider())
        .with_safe_default_protocol_versions()
        .context("TLS protocol versions")?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .context("the certificate and key do not make a TLS configuration")?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// The bridge's client configuration: it trusts the system's roots — as OpenSSL and curl find
/// them: `SSL_CERT_FILE` and `SSL_CERT_DIR` when set, else the platform's store (on Linux
/// `/etc/ssl/certs` and its kin); Mozilla's roots built in when the system has none — and the
/// certificates of `ca_file` (PEM), a team's own CA or a host's self-signed certificate (see
/// [`Verifier`]).
///
/// # Errors
/// An unreadable `ca_file`, or one without a certificate.
pub fn client_config(ca_file: Option<&Path>) -> anyhow::Result<Arc<rustls::ClientConfig>> {
    let mut roots = rustls::RootCertStore::empty();
    let system = rustls_native_certs::load_native_certs();
    for error in &system.errors {
        tracing::debug!("reading the system's CA certificates: {error}");
    }
    let mut trusted = system.certs;
    let (added, _) = roots.add_parsable_certificates(trusted.iter().cloned());
    if added == 0 {
        tracing::debug!("no CA certificate on this system: trusting Mozilla's built-in roots");
        roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    }
    if let Some(file) = ca_file {
        let named = certificates(file, "the CA file")?;
        let (added, _) = roots.add_parsable_certificates(named.iter().cloned());
        anyhow::ensure!(added > 0, "no usable CA certificate in {}", file.display());
        trusted.extend(named);
    }
    let provider = crypto_provider();
    let webpki = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .context("the CA certificates do not make a verifier")?;
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .context("TLS protocol versions")?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(Verifier { webpki, trusted }))
        .with_no_client_auth();
    Ok(Arc::new(config))
}

/// The bridge's verifier: the usual chain to a trusted root (webpki), and one leniency, as
/// OpenSSL has it. A self-signed certificate made as most are (`openssl req -x509`) says it is a
/// CA, which webpki refuses as a server's own certificate (`CaUsedAsEndEntity`) even when it is a
/// trusted root itself; one that is, byte for byte, is taken for the host's own, for the names it
/// holds (its dates were checked before that refusal). Its key is trusted either way.
#[derive(Debug)]
struct Verifier {
    webpki: Arc<WebPkiServerVerifier>,
    /// The trusted certificates (the system's, `--ca-file`'s), as they were read.
    trusted: Vec<CertificateDer<'static>>,
}

impl ServerCertVerifier for Verifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let verified = self.webpki.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        );
        match verified {
            Err(e) if ca_as_end_entity(&e) && self.trusted.iter().any(|c| c == end_entity) => {
                let cert = ParsedCertificate::try_from(end_entity)?;
                rustls::client::verify_server_name(&cert, server_name)?;
                Ok(ServerCertVerified::assertion())
            }
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.webpki.supported_verify_schemes()
    }
}

/// Whether webpki refused a certificate because it is a CA's.
fn ca_as_end_entity(e: &rustls::Error) -> bool {
    let rustls::Error::InvalidCertificate(rustls::CertificateError::Other(other)) = e else {
        return false;
    };
    other.0.downcast_ref::<webpki::Error>() == Some(&webpki::Error::CaUsedAsEndEntity)
}

/// The certificates of the PEM file `path` (`what` it is, for the error); at least one.
fn certificates(path: &Path, what: &str) -> anyhow::Result<Vec<CertificateDer<'static>>> {
    let chain = CertificateDer::pem_file_iter(path)
        .with_context(|| format!("reading {what} {}", path.display()))?
        .collect::<Result<Vec<_>, _>>()
        .with_context(|| format!("reading {what} {}", path.display()))?;
    anyhow::ensure!(!chain.is_empty(), "no certificate in {}", path.display());
    Ok(chain)
}
