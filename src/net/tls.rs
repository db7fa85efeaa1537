//! TLS to an `https://` upstream: rustls (ring), the system's roots unless told otherwise, an
//! operator's CA bundle, a client certificate for mutual TLS, and ALPN offering `h2` before
//! `http/1.1`.
//!
//! The client configuration is built from the files on the first connection and built again
//! when one of them changes (size or modification time, checked at each new connection, which
//! is rare next to requests on kept connections): a rotated client certificate or CA bundle
//! takes effect without a restart. A file that cannot be read fails the connection with a
//! message naming it; connections already open keep working.

use crate::config::UpstreamTls;
use crate::locks::MutexExt;
use rustls::ClientConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

/// What identifies a version of the files: each one's size and modification time.
type Stamp = Vec<Option<(u64, SystemTime)>>;

pub struct TlsConnect {
    settings: UpstreamTls,
    server_name: ServerName<'static>,
    built: Mutex<Option<(Stamp, Arc<ClientConfig>)>>,
}

/// A connection's stream, and whether the server chose HTTP/2.
pub struct Connected {
    pub stream: TlsStream<TcpStream>,
    pub h2: bool,
}

impl TlsConnect {
    /// TLS for an upstream at `host`, checked against `settings.server_name` when given.
    pub fn new(settings: &UpstreamTls, host: &str) -> Result<TlsConnect, String> {
        let name = settings.server_name.as_deref().unwrap_or(host);
        let name = name.trim_start_matches('[').trim_end_matches(']');
        let server_name = ServerName::try_from(name.to_owned())
            .map_err(|e| format!("{name:?} is not a name a certificate can carry: {e}"))?;
        Ok(TlsConnect {
            settings: settings.clone(),
            server_name,
            built: Mutex::new(None),
        })
    }

    pub async fn connect(&self, tcp: TcpStream) -> Result<Connected, String> {
        let config = self.config()?;
        let stream = TlsConnector::from(config)
            .connect(self.server_name.clone(), tcp)
            .await
            .map_err(|e| format!("TLS handshake with {:?} failed: {e}", self.server_name))?;
        let h2 = stream.get_ref().1.alpn_protocol() == Some(b"h2");
        Ok(Connected { stream, h2 })
    }

    fn files(&self) -> [Option<&str>; 3] {
        let s = &self.settings;
        [
            s.ca_file.as_deref(),
            s.client_cert_file.as_deref(),
            s.client_key_file.as_deref(),
        ]
    }

    fn stamp(&self) -> Stamp {
        self.files()
            .iter()
            .map(|f| {
                let m = std::fs::metadata((*f)?).ok()?;
                Some((m.len(), m.modified().ok()?))
            })
            .collect()
    }

    /// The client configuration for the files as they are now.
    fn config(&self) -> Result<Arc<ClientConfig>, String> {
        let stamp = self.stamp();
        let mut built = self.built.locked();
        if let Some((s, c)) = built.as_ref()
            && *s == stamp
        {
            return Ok(c.clone());
        }
        let config = Arc::new(build(&self.settings)?);
        *built = Some((stamp, config.clone()));
        Ok(config)
    }
}

fn build(s: &UpstreamTls) -> Result<ClientConfig, String> {
    let mut roots = rustls::RootCertStore::empty();
    if !s.only_ca_file {
        let native = rustls_native_certs::load_native_certs();
        let (added, _) = roots.add_parsable_certificates(native.certs);
        if added == 0 && s.ca_file.is_none() {
            return Err("no system root certificates were found; give upstream_tls.ca_file".into());
        }
    }
    if let Some(path) = &s.ca_file {
        let certs = certificates(path)?;
        if certs.is_empty() {
            return Err(format!(
                "upstream_tls.ca_file {path}: no PEM certificate in it"
            ));
        }
        for c in certs {
            roots
                .add(c)
                .map_err(|e| format!("upstream_tls.ca_file {path}: {e}"))?;
        }
    } else if s.only_ca_file {
        return Err("upstream_tls.only_ca_file is set without a ca_file".into());
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots);
    let mut config = match (&s.client_cert_file, &s.client_key_file) {
        (Some(cert), Some(key)) => {
            let chain = certificates(cert)?;
            let key = PrivateKeyDer::from_pem_file(key)
                .map_err(|e| format!("upstream_tls.client_key_file {key}: {e}"))?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| format!("the client certificate and key do not go together: {e}"))?
        }
        (None, None) => builder.with_no_client_auth(),
        _ => return Err("give both upstream_tls.client_cert_file and client_key_file".into()),
    };
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}

fn certificates(path: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    CertificateDer::pem_file_iter(path)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("{path}: {e}"))
}
