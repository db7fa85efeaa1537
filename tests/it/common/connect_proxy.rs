//! A forward proxy made for one test: it answers `CONNECT` and tunnels to servers it alone
//! can name (`NAME:PORT` is `127.0.0.1:PORT` here), as a corporate proxy resolves names its
//! clients cannot, and passes on requests that name such a server in full
//! (`POST http://NAME:PORT/mcp`). It notes every tunnel and every request sent whole, and
//! the credentials that came with each.

use base64::Engine;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::tcp::OwnedReadHalf;
use tokio::net::{TcpListener, TcpStream};

/// One tunnel (`target` is `NAME:PORT`) or request sent whole (`target` is the URL it
/// named) the proxy was asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Asked {
    pub target: String,
    /// `Proxy-Authorization`'s credentials, decoded (`user:password`).
    pub credentials: Option<String>,
}

pub struct ConnectProxy {
    pub addr: SocketAddr,
    pub asked: Arc<Mutex<Vec<Asked>>>,
}

impl ConnectProxy {
    /// A proxy on `127.0.0.1:0` that knows the host `name`; with `credentials`
    /// (`user:password`), a tunnel asked for without them gets 407.
    pub async fn start(name: &'static str, credentials: Option<&'static str>) -> ConnectProxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let asked = Arc::new(Mutex::new(Vec::new()));
        let noted = asked.clone();
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let noted = noted.clone();
                tokio::spawn(async move {
                    let _ = tunnel(client, name, credentials, &noted).await;
                });
            }
        });
        ConnectProxy { addr, asked }
    }

    /// The proxy's URL, with `user_info` (`user:password@`) when given.
    pub fn url(&self, user_info: &str) -> String {
        format!("http://{user_info}{}", self.addr)
    }

    pub fn asked(&self) -> Vec<Asked> {
        self.asked.lock().unwrap().clone()
    }
}

/// A request's head as the proxy read it.
struct Head {
    text: String,
    connect: bool,
    target: String,
    /// `Proxy-Authorization`'s credentials, decoded.
    credentials: Option<String>,
    /// Its body's `Content-Length`: what toolgate sends is always whole.
    length: u64,
}

/// The next request's head; `None` when the connection ends first.
async fn read_head(client: &mut BufReader<OwnedReadHalf>) -> std::io::Result<Option<Head>> {
    let mut text = String::new();
    if client.read_line(&mut text).await? == 0 {
        return Ok(None);
    }
    let mut words = text.split(' ');
    let connect = words.next() == Some("CONNECT");
    let target = words.next().unwrap_or_default().to_owned();
    let (mut credentials, mut length) = (None, 0);
    loop {
        let mut header = String::new();
        if client.read_line(&mut header).await? == 0 || header == "\r\n" {
            text.push_str("\r\n");
            break;
        }
        if let Some((k, v)) = header.split_once(':') {
            if k.eq_ignore_ascii_case("proxy-authorization") {
                let encoded = v.trim().strip_prefix("Basic ").unwrap_or_default();
                let plain = base64::engine::general_purpose::STANDARD
                    .decode(encoded)
                    .unwrap_or_default();
                credentials = Some(String::from_utf8_lossy(&plain).into_owned());
            } else if k.eq_ignore_ascii_case("content-length") {
                length = v.trim().parse().unwrap_or(0);
            }
        }
        text.push_str(&header);
    }
    Ok(Some(Head {
        text,
        connect,
        target,
        credentials,
        length,
    }))
}

impl Head {
    fn noted(&self, noted: &Mutex<Vec<Asked>>) {
        noted.lock().unwrap().push(Asked {
            target: self.target.clone(),
            credentials: self.credentials.clone(),
        });
    }
}

async fn tunnel(
    client: TcpStream,
    name: &str,
    credentials: Option<&str>,
    noted: &Mutex<Vec<Asked>>,
) -> std::io::Result<()> {
    let (from_client, mut to_client) = client.into_split();
    let mut from_client = BufReader::new(from_client);
    let Some(first) = read_head(&mut from_client).await? else {
        // Connected and closed without a request: a readiness probe.
        return Ok(());
    };
    first.noted(noted);
    if credentials.is_some() && first.credentials.as_deref() != credentials {
        let refusal = "HTTP/1.1 407 Proxy Authentication Required\r\n\
                       Proxy-Authenticate: Basic realm=\"test\"\r\nContent-Length: 0\r\n\r\n";
        return to_client.write_all(refusal.as_bytes()).await;
    }
    // `NAME:PORT` for a tunnel, `http://NAME:PORT/path` for a request sent whole.
    let authority = first
        .target
        .strip_prefix("http://")
        .unwrap_or(&first.target);
    let authority = authority.split('/').next().unwrap_or_default();
    let port = match authority.split_once(':') {
        Some((host, port)) if host == name => port.to_owned(),
        _ => {
            let refusal = "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n";
            return to_client.write_all(refusal.as_bytes()).await;
        }
    };
    let server = TcpStream::connect(format!("127.0.0.1:{port}")).await?;
    let (mut from_server, mut to_server) = server.into_split();
    if first.connect {
        to_client
            .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
            .await?;
        let up = tokio::io::copy(&mut from_client, &mut to_server);
        let down = tokio::io::copy(&mut from_server, &mut to_client);
        let _ = tokio::join!(up, down);
        return Ok(());
    }
    // Requests sent whole go on as they came (a server accepts a target in full), each
    // noted; the answers come back as they are. A connection's requests all go to the
    // server its first one named.
    tokio::spawn(async move { tokio::io::copy(&mut from_server, &mut to_client).await });
    let mut next = Some(first);
    while let Some(head) = next {
        to_server.write_all(head.text.as_bytes()).await?;
        let mut body = (&mut from_client).take(head.length);
        tokio::io::copy(&mut body, &mut to_server).await?;
        next = read_head(&mut from_client).await?;
        if let Some(head) = &next {
            head.noted(noted);
        }
    }
    Ok(())
}
