//! Response bodies ([`Body`]: whole, or a stream of Server-Sent Events) and the whole responses
//! every route makes: [`full`] bodies, [`plain`] text, [`json`].

use std::convert::Infallible;

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::{Response, StatusCode, header};

/// A response body: whole, or a stream of Server-Sent Events.
pub(super) type Body = BoxBody<Bytes, Infallible>;

/// A whole body.
pub(super) fn full(body: impl Into<Bytes>) -> Body {
    Full::new(body.into()).boxed()
}

/// A plain-text response.
pub(super) fn plain(status: StatusCode, text: &str) -> Response<Body> {
    let mut response = Response::new(full(format!("{text}\n")));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

/// A JSON response.
pub(super) fn json(status: StatusCode, body: impl Into<Bytes>) -> Response<Body> {
    let mut response = Response::new(full(body));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    response
}
