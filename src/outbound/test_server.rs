//! For tests: a CA the test makes ([`TestCa`], with rcgen), and an axum router served over
//! TLS on loopback with a certificate of that CA for `127.0.0.1` and `localhost`.

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair, KeyUsagePurpose,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio::net::TcpListener;
use tower::ServiceExt;

/// A certificate authority of the test's own.
pub(crate) struct TestCa {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

impl TestCa {
    /// A new CA called `name`.
    pub(crate) fn new(name: &str) -> TestCa {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let key = KeyPair::generate().expect("a CA key");
        TestCa {
            issuer: CertifiedIssuer::self_signed(params, key).expect("a CA certificate"),
        }
    }

    /// Writes the CA's certificate as PEM to `dir/NAME` and says where.
    pub(crate) fn write(&self, dir: &Path, name: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, self.issuer.pem()).expect("write the CA file");
        path
    }

    /// A server configuration with a certificate this CA signed for `127.0.0.1` and
    /// `localhost`.
    pub(crate) fn server_config(&self) -> rustls::ServerConfig {
        let key = KeyPair::generate().expect("a server key");
        let params = CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])
            .expect("server params");
        let cert = params
            .signed_by(&key, &self.issuer)
            .expect("a server certificate");
        let chain: Vec<CertificateDer<'static>> =
            vec![cert.der().clone(), self.issuer.der().clone()];
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("TLS versions")
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .expect("a server configuration")
    }
}

/// Serves `router` over TLS (HTTP/1.1) on a free loopback port, with a certificate of `ca`.
pub(crate) async fn serve_tls(router: axum::Router, ca: &TestCa) -> SocketAddr {
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(ca.server_config()));
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("an address");
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let (acceptor, router) = (acceptor.clone(), router.clone());
            tokio::spawn(async move {
                // A client that refuses the certificate ends the handshake: nothing to serve.
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let service = hyper::service::service_fn(move |req| router.clone().oneshot(req));
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(tls), service)
                    .await;
            });
        }
    });
    addr
}
