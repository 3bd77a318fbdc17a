//! The names this server answers to: a request whose `Host` (HTTP/2: `:authority`) is not one
//! of them is refused, so a web page whose name an attacker points at this machine (DNS
//! rebinding) reaches nothing. Admitted: the loopback names (`localhost`, `127.0.0.1`,
//! `[::1]`) and the listening address (listening on all addresses, `0.0.0.0` or `[::]`: any IP
//! address, which no DNS answer can stand for), each with the listening port (or none when that
//! port is 80 or 443, as browsers send it); and the names given with `--allow-host` (a name alone, any
//! port or none; `name:port`, that port only), as a reverse proxy in front may pass on.

use std::net::{IpAddr, SocketAddr};

/// The `Host` values admitted.
#[derive(Clone, Debug)]
pub struct Hosts {
    /// The listening port.
    port: u16,
    /// Names admitted with [`Hosts::port`] (lowercase; IPv6 in brackets).
    local: Vec<String>,
    /// Listening on all addresses: any IP address is admitted with [`Hosts::port`].
    any_address: bool,
    /// `--allow-host` names (lowercase), with their port if one was given.
    allowed: Vec<(String, Option<u16>)>,
}

impl Hosts {
    /// The names of a server listening on `listen`, and `allowed` (`--allow-host`).
    pub fn new(listen: SocketAddr, allowed: &[String]) -> Hosts {
        let mut local: Vec<String> = ["localhost", "127.0.0.1", "[::1]"]
            .map(String::from)
            .to_vec();
        if !listen.ip().is_unspecified() {
            local.push(bracketed(listen.ip()));
        }
        let allowed = allowed
            .iter()
            .map(|name| {
                let (name, port) = split_port(name.trim());
                (name.to_ascii_lowercase(), port)
            })
            .collect();
        Hosts {
            port: listen.port(),
            local,
            any_address: listen.ip().is_unspecified(),
            allowed,
        }
    }

    /// True when `host` (a `Host` value) names this server.
    pub fn admits(&self, host: &str) -> bool {
        let (name, port) = split_port(host.trim());
        let name = name.trim_end_matches('.').to_ascii_lowercase();
        let local_port = match port {
            Some(port) => port == self.port,
            None => matches!(self.port, 80 | 443),
        };
        let address = || {
            let bare = name.strip_prefix('[').and_then(|n| n.strip_suffix(']'));
            match bare {
                Some(v6) => v6.parse::<std::net::Ipv6Addr>().is_ok(),
                None => name.parse::<std::net::Ipv4Addr>().is_ok(),
            }
        };
        (local_port && (self.local.contains(&name) || (self.any_address && address())))
            || self
                .allowed
                .iter()
                .any(|(allowed, only)| *allowed == name && only.is_none_or(|p| Some(p) == port))
    }
}

/// An address as a `Host` names it (IPv6 in brackets).
fn bracketed(ip: IpAddr) -> String {
    match ip {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => format!("[{v6}]"),
    }
}

/// `name:port` split; a port that is not a number is left in the name (which then matches
/// nothing).
fn split_port(host: &str) -> (&str, Option<u16>) {
    match host.rsplit_once(':') {
        // `[::1]` alone: the colon is inside the brackets.
        Some((name, port)) if !port.ends_with(']') => match port.parse() {
            Ok(port) => (name, Some(port)),
            Err(_) => (host, None),
        },
        _ => (host, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_names_the_listening_address_and_allowed_names_only() {
        let hosts = Hosts::new("127.0.0.1:8080".parse().unwrap(), &[]);
        for ok in [
            "localhost:8080",
            "127.0.0.1:8080",
            "[::1]:8080",
            "LOCALHOST:8080",
            "localhost.:8080",
        ] {
            assert!(hosts.admits(ok), "{ok}");
        }
        for refused in [
            "evil.example:8080",
            "localhost:8081",
            "localhost",
            "127.0.0.1",
            "localhost.evil.example:8080",
            "127.0.0.1:8080.evil",
            "[::1]",
            "::1:8080",
            "",
            ":8080",
        ] {
            assert!(!hosts.admits(refused), "{refused}");
        }

        let hosts = Hosts::new(
            "192.0.2.1:443".parse().unwrap(),
            &["Box.Example".into(), "proxy.example:8443".into()],
        );
        for ok in [
            "192.0.2.1",
            "192.0.2.1:443",
            "localhost",
            "box.example",
            "box.example:9999",
            "proxy.example:8443",
        ] {
            assert!(hosts.admits(ok), "{ok}");
        }
        for refused in [
            "192.0.2.2:443",
            "proxy.example",
            "proxy.example:443",
            "example",
        ] {
            assert!(!hosts.admits(refused), "{refused}");
        }

        let any = Hosts::new("[::]:8080".parse().unwrap(), &[]);
        assert!(any.admits("[::1]:8080"));
        assert!(any.admits("10.1.2.3:8080") && any.admits("[2001:db8::7]:8080"));
        assert!(!any.admits("10.1.2.3:8081") && !any.admits("box.example:8080"));
        assert!(!any.admits("[10.1.2.3]:8080") && !any.admits("2001:db8::7:8080"));
        let v6 = Hosts::new("[2001:db8::1]:8080".parse().unwrap(), &[]);
        assert!(v6.admits("[2001:db8::1]:8080"));
    }
}
