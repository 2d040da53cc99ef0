//! The rustls configuration of a client: the ring provider, TLS 1.2 and 1.3, ALPN `http/1.1`,
//! and roots either from the system (loaded once per process, since reading a few hundred
//! certificates is not free) or from one PEM file.

use super::OutboundError;
use rustls::RootCertStore;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use std::path::Path;
use std::sync::{Arc, OnceLock};

/// The TLS configuration of a client trusting `ca_file`'s certificates, or the system's roots.
pub(super) fn client_config(ca_file: Option<&Path>) -> Result<rustls::ClientConfig, OutboundError> {
    let roots = match ca_file {
        Some(path) => Arc::new(roots_from_file(path)?),
        None => system_roots(),
    };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| OutboundError::Build(e.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

/// The certificates of the PEM file at `path`, as trust roots. An error names the file and
/// what is wrong: it cannot be read, it is not PEM, it holds no certificate, or one of its
/// certificates is not one rustls can use as a root.
pub fn roots_from_file(path: &Path) -> Result<RootCertStore, OutboundError> {
    let wrong = |why: String| OutboundError::CaFile {
        path: path.to_owned(),
        why,
    };
    let text = std::fs::read(path).map_err(|e| wrong(format!("cannot be read: {e}")))?;
    let mut roots = RootCertStore::empty();
    for (n, cert) in CertificateDer::pem_slice_iter(&text).enumerate() {
        let cert = cert.map_err(|e| wrong(format!("is not valid PEM: {e}")))?;
        roots
            .add(cert)
            .map_err(|e| wrong(format!("certificate {} is not usable: {e}", n + 1)))?;
    }
    if roots.is_empty() {
        return Err(wrong(
            "holds no certificate; expected PEM blocks of -----BEGIN CERTIFICATE-----".into(),
        ));
    }
    Ok(roots)
}

/// The system's roots, read on first use. Certificates that cannot be read or used are
/// skipped with a warning; with none at all, every `https://` request fails its certificate
/// check (and says so), while `http://` works.
fn system_roots() -> Arc<RootCertStore> {
    static ROOTS: OnceLock<Arc<RootCertStore>> = OnceLock::new();
    ROOTS
        .get_or_init(|| {
            let found = rustls_native_certs::load_native_certs();
            for e in &found.errors {
                tracing::warn!(error = %e, "a system root certificate could not be read");
            }
            let mut roots = RootCertStore::empty();
            let (added, ignored) = roots.add_parsable_certificates(found.certs);
            if ignored > 0 {
                tracing::warn!(ignored, "system root certificates rustls cannot use were skipped");
            }
            if added == 0 {
                tracing::warn!("no system root certificates found: https:// requests will fail their certificate check (give a CA file)");
            }
            Arc::new(roots)
        })
        .clone()
}
