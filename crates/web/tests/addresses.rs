#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Which addresses web_fetch refuses without `allowPrivate`: every special-purpose range, in
//! both families, and the IPv6 forms that lead to an IPv4 address judged by that address.

use nanocrab_web::non_public;
use pretty_assertions::assert_eq;

#[test]
fn every_non_public_range_is_refused_and_public_addresses_are_not() {
    let cases = [
        ("0.0.0.0", Some("a \"this network\" address (0.0.0.0/8)")),
        ("0.1.2.3", Some("a \"this network\" address (0.0.0.0/8)")),
        ("10.1.2.3", Some("a private address (10.0.0.0/8)")),
        (
            "100.64.0.1",
            Some("a shared (carrier-grade NAT) address (100.64.0.0/10)"),
        ),
        (
            "100.127.255.254",
            Some("a shared (carrier-grade NAT) address (100.64.0.0/10)"),
        ),
        ("100.128.0.1", None),
        ("127.0.0.1", Some("a loopback address")),
        ("127.255.255.254", Some("a loopback address")),
        (
            "169.254.169.254",
            Some("a link-local address (where cloud metadata services answer)"),
        ),
        ("172.16.0.1", Some("a private address (172.16.0.0/12)")),
        ("172.31.255.254", Some("a private address (172.16.0.0/12)")),
        ("172.32.0.1", None),
        ("192.0.0.8", Some("an IETF protocol address (192.0.0.0/24)")),
        ("192.0.2.1", Some("a documentation address")),
        ("198.51.100.1", Some("a documentation address")),
        ("203.0.113.1", Some("a documentation address")),
        ("192.88.99.1", Some("a 6to4 relay address (192.88.99.0/24)")),
        ("192.168.1.1", Some("a private address (192.168.0.0/16)")),
        ("198.18.0.1", Some("a benchmarking address (198.18.0.0/15)")),
        ("224.0.0.1", Some("a multicast address")),
        ("239.255.255.250", Some("a multicast address")),
        ("240.0.0.1", Some("a reserved address (240.0.0.0/4)")),
        ("255.255.255.255", Some("the broadcast address")),
        ("8.8.8.8", None),
        ("93.184.215.14", None),
        ("::", Some("the unspecified address (::)")),
        ("::1", Some("a loopback address")),
        ("::ffff:127.0.0.1", Some("a loopback address")),
        (
            "::ffff:169.254.169.254",
            Some("a link-local address (where cloud metadata services answer)"),
        ),
        ("::ffff:8.8.8.8", None),
        ("::127.0.0.1", Some("a loopback address")),
        (
            "::8.8.8.8",
            Some("a deprecated IPv4-compatible address (::/96)"),
        ),
        ("64:ff9b::10.0.0.1", Some("a private address (10.0.0.0/8)")),
        ("64:ff9b::7f00:1", Some("a loopback address")),
        ("64:ff9b::808:808", None),
        (
            "64:ff9b:1::1",
            Some("a local-use NAT64 address (64:ff9b:1::/48)"),
        ),
        (
            "2002:7f00:1::",
            Some("a 6to4 address leading to a non-public IPv4 address"),
        ),
        (
            "2002:c0a8:101::1",
            Some("a 6to4 address leading to a non-public IPv4 address"),
        ),
        ("2002:808:808::1", None),
        ("100::1", Some("a discard address (100::/64)")),
        (
            "2001:db8::1",
            Some("a documentation address (2001:db8::/32)"),
        ),
        ("2001::1", Some("an IETF protocol address (2001::/23)")),
        ("3fff::1", Some("a documentation address (3fff::/20)")),
        (
            "fc00::1",
            Some("a unique local (private) address (fc00::/7)"),
        ),
        (
            "fd00:ec2::254",
            Some("a unique local (private) address (fc00::/7)"),
        ),
        ("fe80::1", Some("a link-local address (fe80::/10)")),
        ("febf::1", Some("a link-local address (fe80::/10)")),
        ("fec0::1", Some("a site-local address (fec0::/10)")),
        ("ff02::1", Some("a multicast address")),
        ("2606:4700:4700::1111", None),
        ("2a00:1450:4001:830::200e", None),
    ];
    let wrong: Vec<String> = cases
        .iter()
        .filter(|(ip, expected)| non_public(ip.parse().unwrap()) != *expected)
        .map(|(ip, expected)| {
            format!(
                "{ip}: expected {expected:?}, got {:?}",
                non_public(ip.parse().unwrap())
            )
        })
        .collect();
    assert_eq!(wrong, Vec::<String>::new());
}
