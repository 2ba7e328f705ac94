//! `requireAuthResults`: whether the receiving server vouches for a mail's From domain.
//!
//! A mail's `From:` is whatever its sender typed. The receiving server checks DKIM, SPF and
//! DMARC and writes what it found into an `Authentication-Results` header (RFC 8601) that it
//! puts on top of the mail. Only the topmost such header naming the configured authserv-id
//! is read: the sender can write headers too, but only below the ones the servers on the way
//! add, and a receiving server removes copies that claim its name. The mail passes when that
//! header says
//! - `dkim=pass` with a signing domain (`header.d`, else `header.i`) aligned with the From
//!   domain, or
//! - `spf=pass` for an envelope sender (`smtp.mailfrom`) aligned with it, or
//! - `dmarc=pass` for the From domain itself (`header.from`): DMARC is alignment checked.
//!
//! Aligned is DMARC's relaxed sense, without the public suffix list: the same domain, or one
//! a subdomain of the other, the shorter having at least two labels.

/// What the check found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    Pass,
    /// Why not, for the log: the results found, or that there were none.
    Fail(String),
}

/// The verdict on a mail whose From address is in `from_domain`, given its header fields in
/// order (`name`, raw value), and the authserv-id of the receiving server.
pub(crate) fn check<'a>(
    headers: impl IntoIterator<Item = (&'a str, &'a str)>,
    authserv_id: &str,
    from_domain: &str,
) -> Verdict {
    let ours = headers
        .into_iter()
        .filter(|(name, _)| name.eq_ignore_ascii_case("Authentication-Results"))
        .map(|(_, value)| parse(value))
        .find(|results| names_server(&results.authserv_id, authserv_id.trim()));
    let Some(results) = ours else {
        return Verdict::Fail(format!(
            "no Authentication-Results header from {}",
            authserv_id.trim()
        ));
    };
    let from_domain = from_domain.to_ascii_lowercase();
    let passed = results.methods.iter().any(|method| {
        if method.result != "pass" {
            return false;
        }
        match method.name.as_str() {
            "dkim" => method
                .property("header.d")
                .or_else(|| {
                    method
                        .property("header.i")
                        .and_then(|identity| identity.rsplit_once('@').map(|(_, domain)| domain))
                })
                .is_some_and(|domain| aligned(domain, &from_domain)),
            "spf" => method
                .property("smtp.mailfrom")
                .map(|sender| sender.rsplit_once('@').map_or(sender, |(_, domain)| domain))
                .is_some_and(|domain| aligned(domain, &from_domain)),
            "dmarc" => method
                .property("header.from")
                .is_some_and(|domain| domain.eq_ignore_ascii_case(&from_domain)),
            _ => false,
        }
    });
    if passed {
        return Verdict::Pass;
    }
    let found: Vec<String> = results
        .methods
        .iter()
        .map(|method| format!("{}={}", method.name, method.result))
        .collect();
    Verdict::Fail(if found.is_empty() {
        format!("{} reports no results", results.authserv_id)
    } else {
        format!(
            "{} reports {}, none aligned with {from_domain}",
            results.authserv_id,
            found.join(" ")
        )
    })
}

/// Whether the authserv-id `id` is the configured one: the same name, or with `*.name`
/// configured, any host under `name` (providers whose every receiving host writes its own
/// name, `mx3.messagingengine.com`).
fn names_server(id: &str, configured: &str) -> bool {
    match configured.strip_prefix("*.") {
        Some(parent) => {
            let id = id.to_ascii_lowercase();
            let parent = parent.to_ascii_lowercase();
            id.ends_with(&format!(".{parent}"))
        }
        None => id.eq_ignore_ascii_case(configured),
    }
}

/// Whether `a` and `b` are one organisation's domains (DMARC's relaxed alignment, roughly).
fn aligned(a: &str, b: &str) -> bool {
    let (a, b) = (
        a.trim().trim_end_matches('.').to_ascii_lowercase(),
        b.trim().trim_end_matches('.').to_ascii_lowercase(),
    );
    if a.is_empty() || b.is_empty() {
        return false;
    }
    let (shorter, longer) = if a.len() <= b.len() { (a, b) } else { (b, a) };
    shorter.contains('.') && (longer == shorter || longer.ends_with(&format!(".{shorter}")))
}

/// One header's results.
#[derive(Debug, PartialEq, Eq)]
struct Results {
    authserv_id: String,
    methods: Vec<Method>,
}

/// `dkim=pass header.d=example.com`: a method, its result, its properties.
#[derive(Debug, PartialEq, Eq)]
struct Method {
    name: String,
    result: String,
    properties: Vec<(String, String)>,
}

impl Method {
    fn property(&self, name: &str) -> Option<&str> {
        self.properties
            .iter()
            .find(|(key, _)| key.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
    }
}

/// An `Authentication-Results` value: `authserv-id [version]; method=result prop=value …; …`,
/// with comments in parentheses and quoted values.
fn parse(value: &str) -> Results {
    let text = without_comments(value);
    let mut parts = text.split(';');
    let authserv_id = parts
        .next()
        .and_then(|head| head.split_whitespace().next())
        .unwrap_or_default()
        .to_owned();
    let methods = parts
        .filter_map(|part| {
            let mut words = part.split_whitespace();
            let (name, result) = words.next()?.split_once('=')?;
            // `dkim/1=pass`: a method's version is not looked at.
            let name = name.split('/').next().unwrap_or(name);
            let properties = words
                .filter_map(|word| word.split_once('='))
                .map(|(key, value)| (key.to_owned(), value.trim_matches('"').to_owned()))
                .collect();
            Some(Method {
                name: name.to_ascii_lowercase(),
                result: result.to_ascii_lowercase(),
                properties,
            })
        })
        .collect();
    Results {
        authserv_id,
        methods,
    }
}

/// `text` without its comments (nested parentheses outside quotes), unfolded.
fn without_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut depth = 0usize;
    let mut quoted = false;
    let mut escaped = false;
    for c in text.chars() {
        if escaped {
            escaped = false;
            if depth == 0 {
                out.push(c);
            }
            continue;
        }
        match c {
            '\\' => {
                escaped = true;
                if depth == 0 {
                    out.push(c);
                }
            }
            '"' if depth == 0 => {
                quoted = !quoted;
                out.push(c);
            }
            '(' if !quoted => depth += 1,
            ')' if !quoted && depth > 0 => depth -= 1,
            '\r' | '\n' | '\t' if depth == 0 => out.push(' '),
            _ if depth == 0 => out.push(c),
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    // The Authentication-Results of a mail Gmail received in 2018, recorded in
    // dinosaure/blaze (MIT) at 0aa5328e31adc53561242072c6801bd57781b45c, test/004.mail, with
    // its ARC-Authentication-Results above it, which is not the same header.
    const GMAIL: [(&str, &str); 2] = [
        (
            "ARC-Authentication-Results",
            " i=1; mx.google.com;\n       dkim=pass header.i=@discoursemail.com header.s=sjc2 header.b=VmvuZ8wM;\n       spf=pass (google.com: domain of ocaml+verp-cdef9eaa098cd788943a4314c682b75a@discoursemail.com designates 216.218.240.121 as permitted sender) smtp.mailfrom=ocaml+verp-cdef9eaa098cd788943a4314c682b75a@discoursemail.com;\n       dmarc=pass (p=QUARANTINE sp=QUARANTINE dis=NONE) header.from=discoursemail.com",
        ),
        (
            "Authentication-Results",
            " mx.google.com;\n       dkim=pass header.i=@discoursemail.com header.s=sjc2 header.b=VmvuZ8wM;\n       spf=pass (google.com: domain of ocaml+verp-cdef9eaa098cd788943a4314c682b75a@discoursemail.com designates 216.218.240.121 as permitted sender) smtp.mailfrom=ocaml+verp-cdef9eaa098cd788943a4314c682b75a@discoursemail.com;\n       dmarc=pass (p=QUARANTINE sp=QUARANTINE dis=NONE) header.from=discoursemail.com",
        ),
    ];

    // A mail vger.kernel.org received in 2024 with a gmail.com From sent through another
    // provider, recorded in dinosaure/blaze (MIT) at c466c2ba9c07d6e1cd72403a1b745dd7a9c6c5a5,
    // test/005.mail: its receiving server wrote three headers, the topmost about ARC only,
    // and the headers of an earlier hop follow.
    const KERNEL: [(&str, &str); 4] = [
        (
            "Authentication-Results",
            " smtp.subspace.kernel.org; arc=pass smtp.client-ip=141.138.168.70",
        ),
        (
            "Authentication-Results",
            " smtp.subspace.kernel.org; dmarc=fail (p=none dis=none) header.from=gmail.com",
        ),
        (
            "Authentication-Results",
            " smtp.subspace.kernel.org; spf=fail smtp.mailfrom=gmail.com",
        ),
        (
            "Authentication-Results",
            " webhostingserver.nl;\n\tiprev=pass (cust-178-250-146-69.breedbanddelft.nl) smtp.remote-ip=178.250.146.69;\n\tauth=pass (PLAIN) smtp.auth=ferry.toth@elsinga.info;\n\tspf=softfail smtp.mailfrom=gmail.com;\n\tdmarc=skipped header.from=gmail.com;\n\tarc=none",
        ),
    ];

    #[test]
    fn a_recorded_gmail_header_vouches_for_its_from_domain() {
        assert_eq!(
            check(GMAIL, "mx.google.com", "discoursemail.com"),
            Verdict::Pass
        );
        assert_eq!(
            check(GMAIL, "MX.Google.com", "DiscourseMail.com"),
            Verdict::Pass
        );
        // The same results say nothing for another From domain.
        assert_eq!(
            check(GMAIL, "mx.google.com", "example.com"),
            Verdict::Fail(
                "mx.google.com reports dkim=pass spf=pass dmarc=pass, none aligned with example.com"
                    .to_owned()
            )
        );
        // Nor when they come from another server than the one configured.
        assert_eq!(
            check(GMAIL, "mx.example.net", "discoursemail.com"),
            Verdict::Fail("no Authentication-Results header from mx.example.net".to_owned())
        );
    }

    #[test]
    fn only_the_topmost_header_of_the_receiving_server_is_read() {
        assert_eq!(
            check(KERNEL, "smtp.subspace.kernel.org", "gmail.com"),
            Verdict::Fail(
                "smtp.subspace.kernel.org reports arc=pass, none aligned with gmail.com".to_owned()
            )
        );
        // A header the sender wrote below the server's own, claiming its name, is not read.
        let forged = [
            ("Authentication-Results", "mx.example.net; dkim=none"),
            (
                "Authentication-Results",
                "mx.example.net; dkim=pass header.d=example.com",
            ),
        ];
        assert_eq!(
            check(forged, "mx.example.net", "example.com"),
            Verdict::Fail("mx.example.net reports dkim=none, none aligned with example.com".into())
        );
    }

    #[test]
    fn results_are_read_past_comments_quotes_and_versions() {
        let header = [(
            "Authentication-Results",
            "mx.example.net 1; dkim/1=pass (good (nested) signature; really) header.d=\"mail.example.com\"",
        )];
        assert_eq!(
            check(header, "mx.example.net", "example.com"),
            Verdict::Pass
        );
        let spf = [(
            "Authentication-Results",
            "mx.example.net; spf=pass smtp.mailfrom=bounce@example.com",
        )];
        assert_eq!(check(spf, "mx.example.net", "example.com"), Verdict::Pass);
        let none = [("Authentication-Results", "mx.example.net 1; none")];
        assert_eq!(
            check(none, "mx.example.net", "example.com"),
            Verdict::Fail("mx.example.net reports no results".to_owned())
        );
    }

    #[test]
    fn a_wildcard_names_any_receiving_host_of_a_provider() {
        let header = [(
            "Authentication-Results",
            "mx3.messagingengine.com; dkim=pass header.d=example.com",
        )];
        assert_eq!(
            check(header, "*.messagingengine.com", "example.com"),
            Verdict::Pass
        );
        assert!(matches!(
            check(header, "*.engine.com", "example.com"),
            Verdict::Fail(_)
        ));
        assert!(!names_server(
            "messagingengine.com.evil.example",
            "*.messagingengine.com"
        ));
    }

    #[test]
    fn alignment_is_the_same_organisation_domain() {
        assert!(aligned("example.com", "example.com"));
        assert!(aligned("mail.example.com", "example.com"));
        assert!(aligned("example.com.", "news.example.com"));
        assert!(!aligned("com", "example.com"));
        assert!(!aligned("example.com", "example.net"));
        assert!(!aligned("badexample.com", "example.com"));
        assert!(!aligned("", "example.com"));
    }
}
