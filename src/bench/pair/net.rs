//! Addresses: where the listener binds (by default the RDMA port's own IPv4 address), reaching
//! the peer, accepting within the time limit; and the port facts the peer needs (sysfs).

use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use super::error::PairError;
use super::protocol::PortDesc;
use crate::bench::gid::is_ipv4_mapped;
use crate::bench::verbs::PortInfo;

/// The running system, through the host layer.
fn live() -> Option<crate::host::Host> {
    crate::host::Host::open(std::path::Path::new("/"), true).ok()
}

/// A sysfs or procfs value of the running system, trimmed; `None` when absent or empty.
fn read_trim(path: &str) -> Option<String> {
    live()?
        .read_fact(path)
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

/// This host's name (for messages that name both ends).
pub fn hostname() -> String {
    read_trim("/proc/sys/kernel/hostname").unwrap_or_else(|| "this host".into())
}

/// The port facts the peer needs, with the GID type and netdev from sysfs.
pub fn port_desc(p: &PortInfo) -> PortDesc {
    let base = format!("/sys/class/infiniband/{}/ports/{}", p.device, p.port);
    let (gid_type, netdev) = match p.gid_index {
        Some(i) => (
            read_trim(&format!("{base}/gid_attrs/types/{i}")),
            read_trim(&format!("{base}/gid_attrs/ndevs/{i}")),
        ),
        None => (None, None),
    };
    let netdev_mtu = netdev
        .as_ref()
        .and_then(|n| read_trim(&format!("/sys/class/net/{n}/mtu")))
        .and_then(|m| m.parse().ok());
    PortDesc {
        host: hostname(),
        device: p.device.clone(),
        port: p.port,
        link_layer: p.link_layer.to_string(),
        state: p.state.clone(),
        lid: p.lid,
        gid: p.gid.clone(),
        gid_raw: p.gid_raw,
        gid_index: p.gid_index,
        gid_type,
        mtu: p.active_mtu,
        netdev,
        netdev_mtu,
        line_rate_gbps: p.line_rate_gbps,
        software: p.software,
    }
}

/// The RDMA port's own IPv4 address: its RoCE GID's, else its netdev's (IPoIB on InfiniBand).
pub fn port_ipv4(desc: &PortDesc) -> Option<Ipv4Addr> {
    if let Some(raw) = desc.gid_raw.filter(is_ipv4_mapped) {
        return Some(Ipv4Addr::new(raw[12], raw[13], raw[14], raw[15]));
    }
    let netdev = desc.netdev.clone().or_else(|| {
        live()?
            .list_dir(&format!("/sys/class/infiniband/{}/device/net", desc.device))
            .into_iter()
            .next()
    })?;
    ipv4_of(&netdev).into_iter().next()
}

/// IPv4 addresses of a netdev of the running system (getifaddrs, through nix).
fn ipv4_of(netdev: &str) -> Vec<Ipv4Addr> {
    let Ok(addrs) = nix::ifaddrs::getifaddrs() else {
        return Vec::new();
    };
    addrs
        .filter(|a| a.interface_name == netdev)
        .filter_map(|a| a.address?.as_sockaddr_in().map(|sin| sin.ip()))
        .collect()
}

/// Parse "IP", "IP:PORT", "[IPv6]:PORT"; None for "".
pub fn parse_bind(s: &str, port: u16) -> Result<Option<SocketAddr>, PairError> {
    let t = s.trim();
    if t.is_empty() {
        return Ok(None);
    }
    if let Ok(a) = t.parse::<SocketAddr>() {
        return Ok(Some(a));
    }
    if let Ok(ip) = t.trim_matches(['[', ']']).parse::<IpAddr>() {
        return Ok(Some(SocketAddr::new(ip, port)));
    }
    Err(PairError::Usage(format!(
        "--listen `{s}`: give an IP address of this host (IP or IP:PORT), e.g. --listen 10.0.0.1"
    )))
}

/// Where to listen: ADDR as given (0.0.0.0 only when asked), else the RDMA port's IPv4 address.
pub fn bind_addr(listen: &str, port: u16, desc: &PortDesc) -> Result<SocketAddr, PairError> {
    if let Some(a) = parse_bind(listen, port)? {
        return Ok(a);
    }
    match port_ipv4(desc) {
        Some(ip) => Ok(SocketAddr::new(IpAddr::V4(ip), port)),
        None => Err(PairError::Usage(format!(
            "{}:{} has no IPv4 address to listen on (its GID is not IPv4-mapped and its netdev has none): give one with --listen ADDR",
            desc.device, desc.port
        ))),
    }
}

/// Accept one connection before the deadline.
pub fn accept_until(
    l: &TcpListener,
    deadline: Instant,
    limit: Duration,
) -> Result<(TcpStream, SocketAddr), PairError> {
    l.set_nonblocking(true)
        .map_err(|e| PairError::Usage(format!("listening socket: {e}")))?;
    loop {
        match l.accept() {
            Ok((s, a)) => {
                let _ = s.set_nonblocking(false);
                return Ok((s, a));
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(PairError::Usage(format!("accept: {e}"))),
        }
        if Instant::now() >= deadline {
            return Err(PairError::TimedOut {
                secs: limit.as_secs(),
                during: "waiting for a client".into(),
                peer: String::new(),
            });
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Connect to HOST[:PORT]; a refused connection is retried for up to 5 s (a listener starting).
pub fn connect(peer: &str, port: u16, deadline: Instant) -> Result<TcpStream, PairError> {
    let with_port = if peer.parse::<SocketAddr>().is_ok()
        || peer
            .rsplit_once(':')
            .is_some_and(|(h, p)| !h.contains(':') && p.parse::<u16>().is_ok())
    {
        peer.to_string()
    } else if peer.contains(':') && !peer.starts_with('[') {
        format!("[{peer}]:{port}")
    } else {
        format!("{peer}:{port}")
    };
    let unreachable = |why: String| PairError::Unreachable {
        peer: with_port.clone(),
        why,
    };
    let addrs: Vec<SocketAddr> = with_port
        .to_socket_addrs()
        .map_err(|e| unreachable(format!("cannot resolve it ({e})")))?
        .collect();
    let Some(addr) = addrs.first().copied() else {
        return Err(unreachable("it resolves to no address".into()));
    };
    let retry_until = (Instant::now() + Duration::from_secs(5)).min(deadline);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(unreachable("no answer within the time limit".into()));
        }
        match TcpStream::connect_timeout(&addr, left.min(Duration::from_secs(30))) {
            Ok(s) => return Ok(s),
            Err(e)
                if e.kind() == std::io::ErrorKind::ConnectionRefused
                    && Instant::now() < retry_until =>
            {
                std::thread::sleep(Duration::from_millis(200));
            }
            Err(e) => return Err(unreachable(e.to_string())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_loopback_has_its_ipv4_address_and_a_missing_netdev_none() {
        assert!(
            ipv4_of("lo").contains(&Ipv4Addr::LOCALHOST),
            "{:?}",
            ipv4_of("lo")
        );
        assert!(ipv4_of("no-such-netdev0").is_empty());
    }
}
