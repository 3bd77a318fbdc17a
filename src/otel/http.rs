//! OTLP/HTTP: where spans go (the standard `OTEL_EXPORTER_OTLP_*` variables) and one blocking
//! POST of a batch (`ureq`, rustls for `https`, a bounded timeout).

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
    pub fn client(&self, timeout: Duration) -> ureq::Agent {
        ureq::Agent::config_builder()
            .timeout_global(Some(timeout))
            .http_status_as_error(false)
            .build()
            .into()
    }

    /// POST `spans` as one request.
    ///
    /// # Errors
    /// The connection failed, timed out, or the backend answered other than 2xx.
    pub fn post(&self, client: &ureq::Agent, spans: &[Span]) -> Result<(), String> {
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
        let mut request = client.post(&self.url).header("content-type", content_type);
        for (k, v) in &self.headers {
            request = request.header(k, v);
        }
        let response = request
            .send(&body[..])
            .map_err(|e| format!("{}: {e}", self.url))?;
        let status = response.status();
        if status.is_success() {
            Ok(())
        } else {
            Err(format!("{}: HTTP {status}", self.url))
        }
    }
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
