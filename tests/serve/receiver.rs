//! A webhook receiver of the test's own on loopback: it records every request's JSON body and
//! answers each with the next status of its script (the last one repeating), or never answers;
//! over plain HTTP, or over TLS with a certificate of a CA the test makes (`start_tls`).

use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

/// How the receiver answers.
#[derive(Clone, Debug)]
pub enum Answer {
    /// These statuses in turn, the last one for every later request.
    Statuses(Vec<u16>),
    /// Reads the request and never answers (the connection stays open).
    Never,
}

/// One request as received, with the status it was answered with (`None`: not answered).
#[derive(Clone, Debug)]
pub struct Received {
    pub headers: Vec<(String, String)>,
    pub body: Value,
    pub status: Option<u16>,
}

pub struct Receiver {
    pub url: String,
    pub received: Arc<Mutex<Vec<Received>>>,
}

impl Receiver {
    pub fn start(answer: Answer) -> Receiver {
        Receiver::listen(answer, None)
    }

    /// The receiver over TLS at `https://127.0.0.1:PORT/hook`, with a certificate for
    /// `127.0.0.1` and `localhost` of a CA made here; the CA's certificate as PEM.
    pub fn start_tls(answer: Answer) -> (Receiver, String) {
        let (config, ca_pem) = tls_config();
        (Receiver::listen(answer, Some(Arc::new(config))), ca_pem)
    }

    fn listen(answer: Answer, tls: Option<Arc<rustls::ServerConfig>>) -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let scheme = if tls.is_some() { "https" } else { "http" };
        let url = format!("{scheme}://{}/hook", listener.local_addr().unwrap());
        let received: Arc<Mutex<Vec<Received>>> = Arc::default();
        let log = received.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                let (log, answer, tls) = (log.clone(), answer.clone(), tls.clone());
                std::thread::spawn(move || match tls {
                    None => serve(stream, &log, &answer),
                    Some(config) => {
                        let Ok(conn) = rustls::ServerConnection::new(config) else {
                            return;
                        };
                        serve(rustls::StreamOwned::new(conn, stream), &log, &answer);
                    }
                });
            }
        });
        Receiver { url, received }
    }

    /// Every request so far.
    pub fn requests(&self) -> Vec<Received> {
        self.received.lock().unwrap().clone()
    }
}

/// Answers the requests of one connection (HTTP/1.1, keep-alive) until it closes.
fn serve(stream: impl Read + Write, log: &Mutex<Vec<Received>>, answer: &Answer) {
    let mut reader = BufReader::new(stream);
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let mut headers = Vec::new();
        let mut length = 0usize;
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h).unwrap_or(0) == 0 {
                return;
            }
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            if let Some((k, v)) = h.split_once(':') {
                if k.eq_ignore_ascii_case("content-length") {
                    length = v.trim().parse().unwrap_or(0);
                }
                headers.push((k.trim().to_ascii_lowercase(), v.trim().to_owned()));
            }
        }
        let mut body = vec![0; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let status = {
            let mut log = log.lock().unwrap();
            let n = log.len();
            let status = match answer {
                Answer::Never => None,
                Answer::Statuses(s) => Some(s[n.min(s.len() - 1)]),
            };
            log.push(Received {
                headers,
                body,
                status,
            });
            status
        };
        let Some(status) = status else {
            // Hold the connection open, answering nothing.
            std::thread::sleep(std::time::Duration::from_secs(600));
            return;
        };
        let reply = format!("HTTP/1.1 {status} X\r\ncontent-length: 0\r\n\r\n");
        let writer = reader.get_mut();
        if writer.write_all(reply.as_bytes()).is_err() || writer.flush().is_err() {
            return;
        }
    }
}

/// A server configuration with a certificate for `127.0.0.1` and `localhost` signed by a new
/// CA, and that CA's certificate as PEM.
fn tls_config() -> (rustls::ServerConfig, String) {
    use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(rcgen::DnType::CommonName, "Rebound serve tests' CA");
    let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate().unwrap()).unwrap();
    let key = KeyPair::generate().unwrap();
    let cert = CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])
        .unwrap()
        .signed_by(&key, &ca)
        .unwrap();
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into());
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![cert.der().clone(), ca.der().clone()], key)
        .unwrap();
    (config, ca.pem())
}
