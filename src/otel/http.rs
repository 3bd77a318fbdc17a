//! OTLP/HTTP: where spans go (the standard `OTEL_EXPORTER_OTLP_*` variables) and one blocking
//! POST of a batch (reqwest, the object store's HTTP client, on a small runtime of its own; rustls
//! for `https`, trusting Mozilla's roots; a bounded timeout).

use std::time::Duration;

use super::otlp;
use super::span::{Attributes, Span};

/// The body encoding (`OTEL_EXPORTER_OTLP_PROTOCOL`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    /// `http/protobuf` (OTLP's default).
    Protobuf,
    /// `http/json`.
    Json,
}

/// An OTLP/HTTP traces endpoint and how to talk to it.
#[derive(Clone, Debug)]
pub struct Endpoint {
    /// The full URL spans are POSTed to.
    pub url: String,
    /// Extra headers (`OTEL_EXPORTER_OTLP_HEADERS`).
    pub headers: Vec<(String, String)>,
    /// The encoding.
    pub protocol: Protocol,
    /// The resource (`OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`).
    pub resource: Attributes,
}

/// `base` + `/v1/traces`, unless it already ends so.
fn traces_url(base: &str) -> String {
    let base = base.trim_end_matches('/');
    if base.ends_with("/v1/traces") {
        base.to_string()
    } else {
        format!("{base}/v1/traces")
    }
}

impl Endpoint {
    /// The endpoint: `url` when given on the command line (a base URL, or one ending in
    /// `/v1/traces`), else `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` as is, else
    /// `OTEL_EXPORTER_OTLP_ENDPOINT` + `/v1/traces`, else `http://localhost:4318/v1/traces`.
    /// `env` reads a variable.
    ///
    /// # Errors
    /// An unsupported `OTEL_EXPORTER_OTLP_PROTOCOL` (`grpc`).
    pub fn from_env(
        url: Option<&str>,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Endpoint, String> {
        let var = |k: &str| env(k).filter(|v| !v.trim().is_empty());
        let url = match url.filter(|u| !u.is_empty()) {
            Some(url) => traces_url(url),
            None => match var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") {
                Some(full) => full,
                None => traces_url(
                    &var("OTEL_EXPORTER_OTLP_ENDPOINT")
                        .unwrap_or_else(|| "http://localhost:4318".into()),
                ),
            },
        };
        let protocol = match var("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
            .or_else(|| var("OTEL_EXPORTER_OTLP_PROTOCOL"))
            .as_deref()
        {
            None | Some("http/protobuf") => Protocol::Protobuf,
            Some("http/json") => Protocol::Json,
            Some(other) => {
                return Err(format!(
                    "OTEL_EXPORTER_OTLP_PROTOCOL={other} is not supported: use http/protobuf or http/json"
                ));
            }
        };
        let headers = var("OTEL_EXPORTER_OTLP_TRACES_HEADERS")
            .or_else(|| var("OTEL_EXPORTER_OTLP_HEADERS"))
            .unwrap_or_default()
            .split(',')
            .filter_map(|pair| {
                let (k, v) = pair.split_once('=')?;
                let k = otlp::percent_decode(k.trim());
                (!k.is_empty()).then(|| (k, otlp::percent_decode(v.trim())))
            })
            .collect();
        Ok(Endpoint {
            url,
            headers,
            protocol,
            resource: otlp::resource(&env),
        })
    }

    /// The same, reading the process environment.
    ///
    /// # Errors
    /// As [`Endpoint::from_env`].
    pub fn from_process_env(url: Option<&str>) -> Result<Endpoint, String> {
        Endpoint::from_env(url, |k| std::env::var(k).ok())
    }

    /// A client that gives up on a request after `timeout`.
    pub fn client(&self, timeout: Duration) -> Client {
        Client::new(timeout)
    }

    /// POST `spans` as one request.
    ///
    /// # Errors
    /// The connection failed, timed out, or the backend answered other than 2xx.
    pub fn post(&self, client: &Client, spans: &[Span]) -> Result<(), String> {
        let (body, content_type) = match self.protocol {
            Protocol::Protobuf => (
                otlp::to_protobuf(&self.resource, spans),
                "application/x-protobuf",
            ),
            Protocol::Json => (
                otlp::to_json(&self.resource, spans)
                    .to_string()
                    .into_bytes(),
                "application/json",
            ),
        };
        let (runtime, http) = client
            .0
            .as_ref()
            .map_err(|e| format!("{}: {e}", self.url))?;
        let mut request = http
            .post(&self.url)
            .header("content-type", content_type)
            .body(body);
        for (k, v) in &self.headers {
            request = request.header(k, v);
        }
        let status = runtime
            .block_on(async {
                let response = request.send().await?;
                let status = response.status();
                // Read to its end, the connection goes back to the pool for the next batch.
                if status.is_success() {
                    response.bytes().await?;
                }
                Ok::<_, reqwest::Error>(status)
            })
            // The URL once, and what went wrong to its cause (connect, TLS, timeout).
            .map_err(|e| format!("{}: {:#}", self.url, anyhow::Error::new(e.without_url())))?;
        if status.is_success() {
            Ok(())
        } else {
            Err(format!("{}: HTTP {status}", self.url))
        }
    }
}

/// A blocking OTLP/HTTP client: reqwest (the HTTP client the object store already uses) on a
/// current-thread runtime of its own, run by [`Endpoint::post`] on the caller's thread (the
/// exporter's, the `export` command's). HTTP/1.1, as for every OTLP/HTTP backend; `https` by
/// rustls on the process's crypto provider, trusting Mozilla's roots (webpki-roots); the
/// `*_PROXY` variables honoured. Or why it could not be made (each POST then says so).
pub struct Client(Result<(tokio::runtime::Runtime, reqwest::Client), String>);

impl Client {
    /// A client that gives up on a request (connecting, sending, the answer) after `timeout`.
    fn new(timeout: Duration) -> Client {
        let made = (|| {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            let http = reqwest::Client::builder()
                .tls_backend_preconfigured(tls_config())
                .timeout(timeout)
                .user_agent(concat!("acp-journal/", env!("CARGO_PKG_VERSION")))
                .build()?;
            anyhow::Ok((runtime, http))
        })();
        Client(made.map_err(|e| format!("the HTTP client: {e:#}")))
    }
}

/// The client's TLS: the process's crypto provider (ring, which `main` installs first; its
/// crate feature, the only one, where nothing did), TLS 1.2 and 1.3, trusting Mozilla's roots as
/// webpki-roots builds them in (whatever the system holds), no client certificate.
fn tls_config() -> rustls::ClientConfig {
    let roots = rustls::RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    };
    rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_standard_variables_choose_the_url_headers_and_protocol() {
        let env = |vars: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                vars.iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string())
            }
        };
        let e = Endpoint::from_env(None, env(&[])).unwrap();
        assert_eq!(e.url, "http://localhost:4318/v1/traces");
        assert_eq!(e.protocol, Protocol::Protobuf);
        let e = Endpoint::from_env(
            None,
            env(&[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318/"),
                ("OTEL_EXPORTER_OTLP_HEADERS", "x-api-key=a%3Db, team = t"),
                ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
            ]),
        )
        .unwrap();
        assert_eq!(e.url, "http://collector:4318/v1/traces");
        assert_eq!(
            e.headers,
            [
                ("x-api-key".into(), "a=b".into()),
                ("team".into(), "t".into())
            ]
        );
        assert_eq!(e.protocol, Protocol::Json);
        let traces = env(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://a:4318"),
            ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "https://b/custom"),
        ]);
        assert_eq!(
            Endpoint::from_env(None, traces).unwrap().url,
            "https://b/custom"
        );
        assert_eq!(
            Endpoint::from_env(Some("http://c:6006"), traces)
                .unwrap()
                .url,
            "http://c:6006/v1/traces"
        );
        assert!(Endpoint::from_env(None, env(&[("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")])).is_err());
    }
}
