//! The `/.well-known/` paths. When toolgate authenticates, it is the protected resource and
//! serves its own RFC 9728 metadata (`oauth-protected-resource`, with each endpoint's path
//! appended, and bare for the first endpoint). When it does not, these documents are the
//! upstream's business, so they are fetched from the upstream's origin with the endpoint
//! path mapped to the upstream's, and passed back untouched.

use crate::auth::{Authenticator, METADATA_PATH};
use crate::gateway::Gateway;
use crate::jsonrpc;
use crate::transport::edge::request::{Endpoint, Server};
use crate::transport::exchange::reply;

use axum::body::Body;
use axum::response::Response;
use http::{Method, StatusCode, header};

pub(super) async fn serve(
    gw: &Gateway,
    endpoints: &[Endpoint],
    method: &Method,
    path: &str,
    query: Option<&str>,
    headers: http::HeaderMap,
) -> Response {
    match &gw.auth {
        Some(auth) => own_metadata(gw, auth, endpoints, path),
        None => from_upstream(gw, endpoints, (method, path, query), headers).await,
    }
}

fn not_found() -> Response {
    reply::transport(
        StatusCode::NOT_FOUND,
        jsonrpc::INVALID_REQUEST,
        "Not found: no document at this path",
    )
}

/// toolgate's RFC 9728 document for the endpoint the path names.
fn own_metadata(
    gw: &Gateway,
    auth: &Authenticator,
    endpoints: &[Endpoint],
    path: &str,
) -> Response {
    let Some(rest) = path.strip_prefix(METADATA_PATH) else {
        return not_found();
    };
    let index = match rest {
        "" | "/" => 0,
        p => match endpoints.iter().find(|e| e.path == p) {
            Some(e) => e.index,
            None => return not_found(),
        },
    };
    let Some(doc) = auth.metadata(&gw.targets[index].path) else {
        return not_found();
    };
    let mut r = reply::json(StatusCode::OK, doc.to_string().into_bytes());
    r.headers_mut().insert(
        header::ACCESS_CONTROL_ALLOW_ORIGIN,
        header::HeaderValue::from_static("*"),
    );
    r
}

/// The upstream's own document: `/.well-known/<doc><endpoint path>` becomes the same
/// document for the upstream's path; anything else goes to the first HTTP upstream as it
/// came.
async fn from_upstream(
    gw: &Gateway,
    endpoints: &[Endpoint],
    (method, path, query): (&Method, &str, Option<&str>),
    headers: http::HeaderMap,
) -> Response {
    let http = |e: &Endpoint| match &e.server {
        Server::Http(up) => Some((up.clone(), e.index)),
        Server::Stdio(_) => None,
    };
    // The longest endpoint path that ends the request's: `/a/mcp` before `/mcp`.
    let mapped = endpoints
        .iter()
        .filter(|e| path.ends_with(e.path.as_str()))
        .max_by_key(|e| e.path.len())
        .and_then(|e| {
            let prefix = &path[..path.len() - e.path.len()];
            let (up, index) = http(e)?;
            let mapped = format!("{prefix}{}", up.http.uri.path().trim_end_matches('/'));
            Some(((up, index), mapped))
        });
    let Some(((up, index), upstream_path)) = mapped.or_else(|| {
        endpoints
            .iter()
            .find_map(http)
            .map(|up| (up, path.to_string()))
    }) else {
        return not_found();
    };
    let target = match query {
        Some(q) => format!("{upstream_path}?{q}"),
        None => upstream_path,
    };
    let wait = (&gw.targets[index].limits).into();
    match up
        .http
        .send_to_path(
            &target,
            method.clone(),
            (headers, bytes::Bytes::new()),
            wait,
        )
        .await
    {
        Ok(resp) => {
            let (mut parts, body) = resp.into_parts();
            crate::net::client::strip_hop_by_hop(&mut parts.headers);
            Response::from_parts(parts, Body::new(body))
        }
        Err(e) => reply::transport(
            StatusCode::BAD_GATEWAY,
            jsonrpc::INTERNAL_ERROR,
            &format!("Upstream unavailable: {e}"),
        ),
    }
}
