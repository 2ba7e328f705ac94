//! Which addresses are not the public internet: loopback, private networks, link-local (cloud
//! metadata), shared (CGNAT), multicast, documentation and the other special-purpose ranges of
//! IANA's registries, and IPv6 forms that carry an IPv4 address (mapped, NAT64, 6to4), judged
//! by the address inside.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// What kind of non-public address `ip` is, in words for an error; `None` for a public one.
pub fn non_public(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => non_public_v4(v4),
        IpAddr::V6(v6) => non_public_v6(v6),
    }
}

fn non_public_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, c, _] = ip.octets();
    match (a, b, c) {
        (0, _, _) => Some("a \"this network\" address (0.0.0.0/8)"),
        (10, _, _) => Some("a private address (10.0.0.0/8)"),
        (100, 64..=127, _) => Some("a shared (carrier-grade NAT) address (100.64.0.0/10)"),
        (127, _, _) => Some("a loopback address"),
        (169, 254, _) => Some("a link-local address (where cloud metadata services answer)"),
        (172, 16..=31, _) => Some("a private address (172.16.0.0/12)"),
        (192, 0, 0) => Some("an IETF protocol address (192.0.0.0/24)"),
        (192, 0, 2) | (198, 51, 100) | (203, 0, 113) => Some("a documentation address"),
        (192, 88, 99) => Some("a 6to4 relay address (192.88.99.0/24)"),
        (192, 168, _) => Some("a private address (192.168.0.0/16)"),
        (198, 18..=19, _) => Some("a benchmarking address (198.18.0.0/15)"),
        (224..=239, _, _) => Some("a multicast address"),
        (255, 255, 255) if ip == Ipv4Addr::BROADCAST => Some("the broadcast address"),
        (240..=255, _, _) => Some("a reserved address (240.0.0.0/4)"),
        _ => None,
    }
}

fn non_public_v6(ip: Ipv6Addr) -> Option<&'static str> {
    let segments = ip.segments();
    let embedded_v4 = |high: u16, low: u16| {
        Ipv4Addr::new(
            (high >> 8) as u8,
            (high & 0xff) as u8,
            (low >> 8) as u8,
            (low & 0xff) as u8,
        )
    };
    if ip.is_unspecified() {
        return Some("the unspecified address (::)");
    }
    if ip.is_loopback() {
        return Some("a loopback address");
    }
    match segments {
        // ::ffff:a.b.c.d and the deprecated ::a.b.c.d reach the IPv4 address itself.
        [0, 0, 0, 0, 0, 0xffff, high, low] | [0, 0, 0, 0, 0, 0, high, low] => {
            return non_public_v4(embedded_v4(high, low)).or(
                // The compatible form is deprecated; nothing public answers on it.
                (segments[5] == 0).then_some("a deprecated IPv4-compatible address (::/96)"),
            );
        }
        // NAT64 (RFC 6052) translates to the IPv4 address in the last 32 bits.
        [0x64, 0xff9b, 0, 0, 0, 0, high, low] => return non_public_v4(embedded_v4(high, low)),
        // 6to4 (2002::/16) tunnels to the IPv4 address in bits 16 to 48.
        [0x2002, high, low, ..] => {
            return non_public_v4(embedded_v4(high, low))
                .map(|_| "a 6to4 address leading to a non-public IPv4 address");
        }
        _ => {}
    }
    let first = segments[0];
    match first {
        0x64 if segments[1] == 0xff9b && segments[2] == 1 => {
            Some("a local-use NAT64 address (64:ff9b:1::/48)")
        }
        0x100 if segments[1..4] == [0, 0, 0] => Some("a discard address (100::/64)"),
        0x2001 if segments[1] == 0xdb8 => Some("a documentation address (2001:db8::/32)"),
        // IETF protocol assignments, Teredo (2001::/32) among them, which tunnels to IPv4.
        0x2001 if segments[1] < 0x200 => Some("an IETF protocol address (2001::/23)"),
        0x3fff if segments[1] < 0x1000 => Some("a documentation address (3fff::/20)"),
        _ if first & 0xfe00 == 0xfc00 => Some("a unique local (private) address (fc00::/7)"),
        _ if first & 0xffc0 == 0xfe80 => Some("a link-local address (fe80::/10)"),
        _ if first & 0xffc0 == 0xfec0 => Some("a site-local address (fec0::/10)"),
        _ if first & 0xff00 == 0xff00 => Some("a multicast address"),
        _ => None,
    }
}
