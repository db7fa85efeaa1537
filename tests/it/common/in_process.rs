//! toolgate as a library in an application: a `ValidateLayer` around the application's own
//! MCP service, served on `127.0.0.1:0`. The application here hands every request on to an
//! HTTP server as it came, so the layer is driven in front of the same servers as the
//! binary's modes.

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::response::Response;
use http::Request;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use std::net::SocketAddr;
use toolgate::ValidateLayer;
use toolgate::config::{Config, Overrides};

/// The application, served; it stops when dropped.
pub struct InProcess {
    pub addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for InProcess {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl InProcess {
    /// The application in front of the MCP server at `url`, with the rules of `config` (a
    /// configuration file's text) or the defaults.
    pub async fn start(url: &str, config: Option<&str>) -> InProcess {
        let config = match config {
            Some(text) => {
                let file = super::tempfile_lite::TempFile::new(text);
                Config::load(Some(&file.path), &Overrides::default()).expect("the rules load")
            }
            None => Config::default(),
        };
        let upstream: http::Uri = url.parse().expect("an upstream URL");
        let app = Router::new()
            .fallback(forward)
            .with_state((Client::builder(TokioExecutor::new()).build_http(), upstream))
            .layer(ValidateLayer::new(config).expect("the rules load"));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        InProcess { addr, task }
    }

    pub fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }
}

/// The application's MCP service: the request, to the server, as it came.
async fn forward(
    State((client, upstream)): State<(Client<HttpConnector, Body>, http::Uri)>,
    req: Request<Body>,
) -> Response {
    let (mut parts, body) = req.into_parts();
    parts.uri = upstream;
    parts.headers.remove(http::header::HOST);
    match client.request(Request::from_parts(parts, body)).await {
        Ok(resp) => resp.map(Body::new),
        Err(e) => Response::builder()
            .status(502)
            .body(Body::from(format!("the server is unreachable: {e}")))
            .unwrap(),
    }
}
