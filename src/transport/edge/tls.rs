//! TLS at the client listener, off unless `[tls]` names a certificate.
//!
//! The server configuration is built from the files at start and built again when one of them
//! changes (size or modification time, looked at when a connection arrives, at most once a
//! second): cert-manager rotating a Secret's files reaches new connections without a restart,
//! and connections already open keep the session they negotiated. A rotation caught half
//! written (a certificate without its new key) keeps the configuration in force and is
//! logged; the next look tries again. With `client_ca_file`, clients must present a
//! certificate from that CA. ALPN offers `h2` and `http/1.1`.

use crate::config::{ConfigError, ListenerTls};
use crate::locks::MutexExt;
use crate::net::tls::{Stamp, stamps};
use rustls::ServerConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio_rustls::TlsAcceptor;

/// How often the files are looked at, at most.
const LOOK_EVERY: Duration = Duration::from_secs(1);

pub struct Acceptor {
    settings: ListenerTls,
    state: Mutex<State>,
}

struct State {
    stamp: Stamp,
    looked: Instant,
    acceptor: TlsAcceptor,
}

impl Acceptor {
    /// Reads the files once; `Err` says which one is wrong, so toolgate does not start with
    /// a listener nobody can connect to.
    pub fn new(settings: &ListenerTls) -> Result<Acceptor, ConfigError> {
        let stamp = stamp(settings);
        let acceptor = TlsAcceptor::from(Arc::new(build(settings)?));
        Ok(Acceptor {
            settings: settings.clone(),
            state: Mutex::new(State {
                stamp,
                looked: Instant::now(),
                acceptor,
            }),
        })
    }

    /// The acceptor for the files as they are now.
    pub fn current(&self) -> TlsAcceptor {
        let mut s = self.state.locked();
        if s.looked.elapsed() >= LOOK_EVERY {
            s.looked = Instant::now();
            let now = stamp(&self.settings);
            if now != s.stamp {
                match build(&self.settings) {
                    Ok(config) => {
                        tracing::info!(
                            "the listener's TLS files changed: new connections use them"
                        );
                        s.acceptor = TlsAcceptor::from(Arc::new(config));
                        s.stamp = now;
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "the listener's TLS files changed but do not load; the previous ones stay in use");
                    }
                }
            }
        }
        s.acceptor.clone()
    }
}

fn stamp(s: &ListenerTls) -> Stamp {
    stamps(&[
        Some(s.cert_file.as_str()),
        Some(s.key_file.as_str()),
        s.client_ca_file.as_deref(),
    ])
}

fn build(s: &ListenerTls) -> Result<ServerConfig, ConfigError> {
    let file = |key: &str, path: &str, e: &dyn std::fmt::Display| {
        ConfigError(format!("tls.{key} {path}: {e}"))
    };
    let chain = CertificateDer::pem_file_iter(&s.cert_file)
        .and_then(|c| c.collect::<Result<Vec<_>, _>>())
        .map_err(|e| file("cert_file", &s.cert_file, &e))?;
    if chain.is_empty() {
        return Err(file("cert_file", &s.cert_file, &"no PEM certificate in it"));
    }
    let key =
        PrivateKeyDer::from_pem_file(&s.key_file).map_err(|e| file("key_file", &s.key_file, &e))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| ConfigError(e.to_string()))?;
    let builder = match &s.client_ca_file {
        None => builder.with_no_client_auth(),
        Some(path) => {
            let mut roots = rustls::RootCertStore::empty();
            let certs = CertificateDer::pem_file_iter(path)
                .and_then(|c| c.collect::<Result<Vec<_>, _>>())
                .map_err(|e| file("client_ca_file", path, &e))?;
            for c in certs {
                roots.add(c).map_err(|e| file("client_ca_file", path, &e))?;
            }
            let verifier =
                rustls::server::WebPkiClientVerifier::builder_with_provider(roots.into(), provider)
                    .build()
                    .map_err(|e| file("client_ca_file", path, &e))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut config = builder.with_single_cert(chain, key).map_err(|e| {
        ConfigError(format!(
            "tls.cert_file and tls.key_file do not go together: {e}"
        ))
    })?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}
