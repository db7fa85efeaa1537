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
    /// The layer's gateway state, whose metrics the application serves as it likes.
    gw: std::sync::Arc<toolgate::Gateway>,
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
        let layer = ValidateLayer::new(config).expect("the rules load");
        let gw = layer.gateway().clone();
        let app = Router::new()
            .fallback(forward)
            .with_state((Client::builder(TokioExecutor::new()).build_http(), upstream))
            .layer(layer);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        InProcess { addr, task, gw }
    }

    /// `/metrics` as the application serves it: toolgate's admin router over the layer's
    /// gateway, here called in process.
    pub async fn metrics(&self) -> String {
        use tower::ServiceExt;
        let router = toolgate::admin_router(toolgate::Live::new(self.gw.clone()));
        let req = Request::get("/metrics")
            .header(http::header::HOST, "127.0.0.1")
            .body(Body::empty())
            .unwrap();
        let resp = router.oneshot(req).await.unwrap();
        let body = http_body_util::BodyExt::collect(resp.into_body())
            .await
            .unwrap();
        String::from_utf8(body.to_bytes().to_vec()).unwrap()
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
