//! A forward proxy made for one test: it answers `CONNECT` and tunnels to servers it alone
//! can name (`NAME:PORT` is `127.0.0.1:PORT` here), as a corporate proxy resolves names its
//! clients cannot, and passes on a request that names such a server in full
//! (`POST http://NAME:PORT/mcp`), relaying the rest of its connection to the same server.
//! It notes every tunnel and the first request of every connection, and the credentials
//! that came with each.

use base64::Engine;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

/// One tunnel (`target` is `NAME:PORT`) or connection's first request (`target` is the URL
/// it named) the proxy was asked for.
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

async fn tunnel(
    client: TcpStream,
    name: &str,
    credentials: Option<&str>,
    noted: &Mutex<Vec<Asked>>,
) -> std::io::Result<()> {
    let mut client = BufReader::new(client);
    let mut head = String::new();
    if client.read_line(&mut head).await? == 0 {
        // Connected and closed without a request: a readiness probe.
        return Ok(());
    }
    let mut words = head.split(' ');
    let connect = words.next() == Some("CONNECT");
    let target = words.next().unwrap_or_default().to_owned();
    let mut given = None;
    loop {
        let mut header = String::new();
        if client.read_line(&mut header).await? == 0 || header == "\r\n" {
            head.push_str("\r\n");
            break;
        }
        if let Some((k, v)) = header.split_once(':')
            && k.eq_ignore_ascii_case("proxy-authorization")
        {
            let encoded = v.trim().strip_prefix("Basic ").unwrap_or_default();
            let plain = base64::engine::general_purpose::STANDARD
                .decode(encoded)
                .unwrap_or_default();
            given = Some(String::from_utf8_lossy(&plain).into_owned());
        }
        head.push_str(&header);
    }
    noted.lock().unwrap().push(Asked {
        target: target.clone(),
        credentials: given.clone(),
    });
    if credentials.is_some() && given.as_deref() != credentials {
        let refusal = "HTTP/1.1 407 Proxy Authentication Required\r\n\
                       Proxy-Authenticate: Basic realm=\"test\"\r\nContent-Length: 0\r\n\r\n";
        return client.into_inner().write_all(refusal.as_bytes()).await;
    }
    // `NAME:PORT` for a tunnel, `http://NAME:PORT/path` for a request sent whole.
    let authority = target.strip_prefix("http://").unwrap_or(&target);
    let authority = authority.split('/').next().unwrap_or_default();
    let port = match authority.split_once(':') {
        Some((host, port)) if host == name => port.to_owned(),
        _ => {
            let refusal = "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n";
            return client.into_inner().write_all(refusal.as_bytes()).await;
        }
    };
    let mut server = TcpStream::connect(format!("127.0.0.1:{port}")).await?;
    if connect {
        client
            .get_mut()
            .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
            .await?;
    } else {
        // The request goes on as it came (a server accepts a target in full); the rest of
        // the connection is relayed as it is, to the same server.
        server.write_all(head.as_bytes()).await?;
        server.write_all(client.buffer()).await?;
    }
    let mut client = client.into_inner();
    tokio::io::copy_bidirectional(&mut client, &mut server).await?;
    Ok(())
}
