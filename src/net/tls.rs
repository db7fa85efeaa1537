//! TLS to an `https://` upstream: rustls (ring), the system's roots unless told otherwise, an
//! operator's CA bundle, a client certificate for mutual TLS, and ALPN offering `h2` before
//! `http/1.1`.
//!
//! The client configuration is built from the files on the first connection and built again
//! when one of them changes (size or modification time, checked at each new connection, which
//! is rare next to requests on kept connections): a rotated client certificate or CA bundle
//! takes effect without a restart. A file that cannot be used when toolgate starts stops it
//! with a message naming it; one that breaks later fails the new connection with that
//! message, and connections already open keep working.

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

/// Why TLS to an upstream cannot be set up or did not complete.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("{name:?} is not a name a certificate can carry: {source}")]
    ServerName {
        name: String,
        source: rustls::pki_types::InvalidDnsNameError,
    },
    #[error("TLS handshake with {name} failed: {source}")]
    Handshake {
        name: String,
        source: std::io::Error,
    },
    /// A file the settings name cannot be used.
    #[error("{what} {path}: {why}")]
    File {
        what: &'static str,
        path: String,
        why: String,
    },
    /// The settings do not make a configuration.
    #[error("{0}")]
    Settings(&'static str),
    /// A client certificate without its key, or a key without its certificate.
    #[error("give both {cert} and {}", key.rsplit('.').next().unwrap_or(key))]
    HalfIdentity {
        cert: &'static str,
        key: &'static str,
    },
    #[error("no system root certificates were found; give {ca_key}")]
    NoRoots { ca_key: &'static str },
    #[error("{0}")]
    Rustls(#[from] rustls::Error),
}

/// What identifies a version of some files, each's [`FileStamp`] (`None`: absent).
pub(crate) type Stamp = Vec<Option<FileStamp>>;

/// What tells that a file changed without reading it: its size and modification time, and
/// its inode and change time, which a copy that keeps the old modification time (`cp -p`) or
/// a file renamed over it (a Kubernetes secret's update) still changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FileStamp {
    len: u64,
    modified: SystemTime,
    inode: u64,
    changed: (i64, i64),
}

/// The stamps of `files`, in their order.
pub(crate) fn stamps(files: &[Option<&str>]) -> Stamp {
    files
        .iter()
        .map(|f| {
            let m = std::fs::metadata((*f)?).ok()?;
            Some(FileStamp {
                len: m.len(),
                modified: m.modified().ok()?,
                inode: std::os::unix::fs::MetadataExt::ino(&m),
                changed: (
                    std::os::unix::fs::MetadataExt::ctime(&m),
                    std::os::unix::fs::MetadataExt::ctime_nsec(&m),
                ),
            })
        })
        .collect()
}

pub struct TlsConnect {
    settings: UpstreamTls,
    server_name: ServerName<'static>,
    built: Mutex<Option<(Stamp, Arc<ClientConfig>)>>,
}

/// A connection's stream, whether the server chose HTTP/2, and whether it asked for a
/// client certificate.
pub struct Connected {
    pub stream: TlsStream<TcpStream>,
    pub h2: bool,
    /// In TLS 1.3 a server that refuses the client's certificate says so after the
    /// handshake, with an alert that the first request's write can race and lose (the write
    /// fails with a broken pipe before the alert is read); knowing the server asked is what
    /// tells that failure from a server that went away.
    pub asked_for_certificate: bool,
}

thread_local! {
    /// Set by [`Noting`] while a handshake is polled on this thread; see [`TlsConnect::connect`].
    static ASKED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// The configured client-certificate resolver, noting that the server asked for one.
/// rustls calls it synchronously, from inside the poll of the handshake, exactly when a
/// `CertificateRequest` arrives, whether or not a certificate is configured.
#[derive(Debug)]
struct Noting(Arc<dyn rustls::client::ResolvesClientCert>);

impl rustls::client::ResolvesClientCert for Noting {
    fn resolve(
        &self,
        root_hint_subjects: &[&[u8]],
        sigschemes: &[rustls::SignatureScheme],
    ) -> Option<Arc<rustls::sign::CertifiedKey>> {
        ASKED.set(true);
        self.0.resolve(root_hint_subjects, sigschemes)
    }

    fn only_raw_public_keys(&self) -> bool {
        self.0.only_raw_public_keys()
    }

    fn has_certs(&self) -> bool {
        self.0.has_certs()
    }
}

impl TlsConnect {
    /// TLS for an upstream at `host`, checked against `settings.server_name` when given.
    pub fn new(settings: &UpstreamTls, host: &str) -> Result<TlsConnect, TlsError> {
        let name = settings.server_name.as_deref().unwrap_or(host);
        let name = name.trim_start_matches('[').trim_end_matches(']');
        let server_name =
            ServerName::try_from(name.to_owned()).map_err(|source| TlsError::ServerName {
                name: name.to_owned(),
                source,
            })?;
        let connect = TlsConnect {
            settings: settings.clone(),
            server_name,
            built: Mutex::new(None),
        };
        // The files are read once now: one that cannot be used is a configuration problem,
        // found at the start rather than by the first request.
        connect.config()?;
        Ok(connect)
    }

    pub async fn connect(&self, tcp: TcpStream) -> Result<Connected, TlsError> {
        let config = self.config()?;
        let mut handshake =
            std::pin::pin!(TlsConnector::from(config).connect(self.server_name.clone(), tcp));
        // One resolver serves every connection (a per-connection one would defeat session
        // resumption), so what it notes is read around each poll of this handshake.
        let mut asked_for_certificate = false;
        let stream = std::future::poll_fn(|cx| {
            ASKED.set(false);
            let polled = handshake.as_mut().poll(cx);
            asked_for_certificate |= ASKED.replace(false);
            polled
        })
        .await
        .map_err(|source| TlsError::Handshake {
            name: format!("{:?}", self.server_name),
            source,
        })?;
        let h2 = stream.get_ref().1.alpn_protocol() == Some(b"h2");
        Ok(Connected {
            stream,
            h2,
            asked_for_certificate,
        })
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
        stamps(&self.files())
    }

    /// The client configuration for the files as they are now.
    fn config(&self) -> Result<Arc<ClientConfig>, TlsError> {
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

fn build(s: &UpstreamTls) -> Result<ClientConfig, TlsError> {
    if s.only_ca_file && s.ca_file.is_none() {
        return Err(TlsError::Settings(
            "upstream_tls.only_ca_file is set without a ca_file",
        ));
    }
    let roots = roots(s.ca_file.as_deref(), s.only_ca_file, "upstream_tls.ca_file")?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots);
    let keys = (
        "upstream_tls.client_cert_file",
        "upstream_tls.client_key_file",
    );
    let identity = client_identity(
        s.client_cert_file.as_deref(),
        s.client_key_file.as_deref(),
        keys,
    )?;
    let mut config = match identity {
        Some(id) => builder.with_client_auth_cert(id.chain, id.key)?,
        None => builder.with_no_client_auth(),
    };
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    config.client_auth_cert_resolver = Arc::new(Noting(config.client_auth_cert_resolver.clone()));
    Ok(config)
}

/// The files a client's TLS is made with (a CA file, a client certificate and its key), as
/// they are now, by path and [`Stamp`]: a client made with them is made again when a reload
/// finds any of them changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TlsFiles {
    paths: Vec<Option<String>>,
    stamp: Stamp,
}

impl TlsFiles {
    pub(crate) fn now(paths: &[Option<&str>]) -> TlsFiles {
        TlsFiles {
            paths: paths.iter().map(|p| p.map(str::to_owned)).collect(),
            stamp: stamps(paths),
        }
    }
}

/// The roots a server's certificate is checked against: the system's (unless `only_ca_file`)
/// and the PEM certificates in `ca_file`, which `ca_key` names in errors. Shared by every
/// TLS client toolgate has, so that one setting means one thing wherever it is given.
pub(crate) fn roots(
    ca_file: Option<&str>,
    only_ca_file: bool,
    ca_key: &'static str,
) -> Result<rustls::RootCertStore, TlsError> {
    let mut roots = rustls::RootCertStore::empty();
    if !only_ca_file {
        let native = rustls_native_certs::load_native_certs();
        let (added, _) = roots.add_parsable_certificates(native.certs);
        if added == 0 && ca_file.is_none() {
            return Err(TlsError::NoRoots { ca_key });
        }
    }
    if let Some(path) = ca_file {
        for c in ca_certificates(path, ca_key)? {
            roots
                .add(c)
                .map_err(|e| ca_file_error(path, ca_key, e.to_string()))?;
        }
    }
    Ok(roots)
}

/// The certificates of a CA file, at least one.
fn ca_certificates(
    path: &str,
    ca_key: &'static str,
) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs = certificates(path).map_err(|e| ca_file_error(path, ca_key, e.to_string()))?;
    if certs.is_empty() {
        return Err(ca_file_error(
            path,
            ca_key,
            "no PEM certificate in it".into(),
        ));
    }
    Ok(certs)
}

fn ca_file_error(path: &str, ca_key: &'static str, why: String) -> TlsError {
    TlsError::File {
        what: ca_key,
        path: path.to_owned(),
        why,
    }
}

/// The system's roots and the PEM certificates in `ca_file` (named `ca_key` in errors), as
/// PEM text: for a client that takes its roots that way (Redis's), and uses only those.
pub(crate) fn roots_pem(ca_file: &str, ca_key: &'static str) -> Result<Vec<u8>, TlsError> {
    use base64::Engine;
    let own = ca_certificates(ca_file, ca_key)?;
    // Only what parses as a trust anchor: the client refuses the whole set for one that
    // does not, where the system's store may hold such a certificate.
    let mut probe = rustls::RootCertStore::empty();
    let native: Vec<_> = rustls_native_certs::load_native_certs()
        .certs
        .into_iter()
        .filter(|c| probe.add(c.clone()).is_ok())
        .collect();
    let mut pem = Vec::new();
    for der in native.iter().chain(&own) {
        let text = base64::engine::general_purpose::STANDARD.encode(der);
        pem.extend_from_slice(b"-----BEGIN CERTIFICATE-----\n");
        for line in text.as_bytes().chunks(64) {
            pem.extend_from_slice(line);
            pem.push(b'\n');
        }
        pem.extend_from_slice(b"-----END CERTIFICATE-----\n");
    }
    Ok(pem)
}

/// A client certificate chain and its key: as their files hold them (PEM, for a client that
/// takes them that way, Redis's) and parsed.
pub(crate) struct ClientIdentity {
    pub(crate) cert_pem: Vec<u8>,
    pub(crate) key_pem: Vec<u8>,
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
}

/// The client identity in `cert` and `key` when both are given, read, parsed and checked to
/// go together, so that a problem is found when the settings are read and names its key
/// (`keys`: the certificate's, the key's); `None` when neither is.
pub(crate) fn client_identity(
    cert: Option<&str>,
    key: Option<&str>,
    keys: (&'static str, &'static str),
) -> Result<Option<ClientIdentity>, TlsError> {
    let (cert, key) = match (cert, key) {
        (Some(cert), Some(key)) => (cert, key),
        (None, None) => return Ok(None),
        _ => {
            return Err(TlsError::HalfIdentity {
                cert: keys.0,
                key: keys.1,
            });
        }
    };
    let file = |what, path: &str, why: String| TlsError::File {
        what,
        path: path.to_owned(),
        why,
    };
    let read = |what, path: &str| std::fs::read(path).map_err(|e| file(what, path, e.to_string()));
    let (cert_pem, key_pem) = (read(keys.0, cert)?, read(keys.1, key)?);
    let chain = CertificateDer::pem_slice_iter(&cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| file(keys.0, cert, e.to_string()))?;
    if chain.is_empty() {
        return Err(file(keys.0, cert, "no PEM certificate in it".into()));
    }
    let private =
        PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| file(keys.1, key, e.to_string()))?;
    let provider = rustls::crypto::ring::default_provider();
    rustls::sign::CertifiedKey::from_der(chain.clone(), private.clone_key(), &provider).map_err(
        |e| {
            file(
                keys.0,
                cert,
                format!("the client certificate and key do not go together: {e}"),
            )
        },
    )?;
    Ok(Some(ClientIdentity {
        cert_pem,
        key_pem,
        chain,
        key: private,
    }))
}

fn certificates(path: &str) -> Result<Vec<CertificateDer<'static>>, rustls::pki_types::pem::Error> {
    CertificateDer::pem_file_iter(path).and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
}

#[cfg(test)]
mod stamp_tests {
    use super::*;

    /// A certificate rotated by `cp -p` keeps its size and its old modification time; its
    /// change time still tells.
    #[test]
    fn a_copy_that_keeps_the_old_modification_time_is_still_a_change() {
        let path = std::env::temp_dir().join(format!("toolgate-stamp-{}", std::process::id()));
        std::fs::write(&path, "certificate one").unwrap();
        let p = path.to_str().unwrap();
        let before = stamps(&[Some(p)]);
        let modified = std::fs::metadata(&path).unwrap().modified().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(50));
        std::fs::write(&path, "certificate two").unwrap();
        let f = std::fs::File::options().write(true).open(&path).unwrap();
        f.set_modified(modified).unwrap();
        drop(f);
        let after = stamps(&[Some(p)]);
        let _ = std::fs::remove_file(&path);
        assert_eq!(after[0].as_ref().map(|s| s.modified), Some(modified));
        assert_ne!(before, after);
    }
}
