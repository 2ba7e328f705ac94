//! The names MCP tools are offered under: `<server>__<tool>`, in the characters and length
//! every provider accepts for a tool name.

use sha2::Digest as _;

/// The longest tool name providers take (OpenAI's and Anthropic's limit).
pub const MAX_TOOL_NAME: usize = 64;

/// How many characters of a hash tell apart two names that were cut or changed to fit.
const HASH_CHARS: usize = 8;

/// `<server>__<tool>` with every character outside `[A-Za-z0-9_-]` turned into `_`; a name
/// longer than [`MAX_TOOL_NAME`] is cut and ends with a hash of the whole, so names that
/// share a long beginning stay apart.
pub fn tool_name(server: &str, tool: &str) -> String {
    let whole = format!("{server}__{tool}");
    let name: String = whole
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if name.len() <= MAX_TOOL_NAME {
        return name;
    }
    let keep = MAX_TOOL_NAME - HASH_CHARS - 1;
    format!("{}_{}", &name[..keep], short_hash(&whole))
}

/// `name`, or, when another tool already took it (`taken`), `name` with a hash of the tool's
/// own name in place of its end: `a.b` and `a_b` of one server both sanitise to `a_b`.
pub fn unique_tool_name(server: &str, tool: &str, taken: &[String]) -> String {
    let name = tool_name(server, tool);
    if !taken.contains(&name) {
        return name;
    }
    let keep = name.len().min(MAX_TOOL_NAME - HASH_CHARS - 1);
    format!("{}_{}", &name[..keep], short_hash(tool))
}

fn short_hash(text: &str) -> String {
    sha2::Sha256::digest(text.as_bytes())
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect::<String>()[..HASH_CHARS]
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn names_keep_to_the_characters_and_length_providers_take() {
        assert_eq!(tool_name("everything", "echo"), "everything__echo");
        assert_eq!(
            tool_name("everything", "get-tiny-image"),
            "everything__get-tiny-image"
        );
        assert_eq!(
            tool_name("my server", "fs.read/file"),
            "my_server__fs_read_file"
        );
        let long = "a".repeat(80);
        let cut = tool_name("srv", &long);
        assert_eq!(cut.len(), MAX_TOOL_NAME);
        assert!(cut.starts_with("srv__aaaa"), "{cut}");
        assert_ne!(cut, tool_name("srv", &format!("{long}b")));
    }

    #[test]
    fn two_tools_that_sanitise_alike_get_different_names() {
        let first = unique_tool_name("s", "a.b", &[]);
        let second = unique_tool_name("s", "a_b", std::slice::from_ref(&first));
        assert_eq!(first, "s__a_b");
        assert_ne!(first, second);
        assert!(second.starts_with("s__a_b_"), "{second}");
    }
}
