//! A page as the model reads it: its accessibility tree (Chromium's
//! `Accessibility.getFullAXTree`) as indented lines, `[3] button "Send"`, where the numbered
//! elements are the ones an action can name by `ref`.

use std::collections::HashMap;

use serde_json::Value;

/// Roles an action can act on: they get a number.
const ACTIONABLE: [&str; 18] = [
    "button",
    "link",
    "textbox",
    "searchbox",
    "combobox",
    "listbox",
    "option",
    "checkbox",
    "radio",
    "switch",
    "slider",
    "spinbutton",
    "menuitem",
    "menuitemcheckbox",
    "menuitemradio",
    "tab",
    "treeitem",
    "textarea",
];

/// Roles that are only structure: their children are shown in their place, and they
/// themselves only when they have a name.
const STRUCTURE: [&str; 4] = ["none", "generic", "presentation", "LineBreak"];

/// Chromium's pieces of a text it already shows whole: never shown.
const PIECES: [&str; 2] = ["InlineTextBox", "ListMarker"];

/// States worth telling the model, as Chromium names the properties.
const STATES: [&str; 7] = [
    "checked", "disabled", "expanded", "selected", "required", "focused", "invalid",
];

/// The tree as lines, and the DOM node (backend node id) behind each number, the first one
/// being `[1]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    pub text: String,
    pub refs: Vec<i64>,
}

/// `nodes`: the `nodes` of `Accessibility.getFullAXTree`, as JSON.
pub fn render(nodes: &[Value]) -> Snapshot {
    let by_id: HashMap<&str, &Value> = nodes
        .iter()
        .filter_map(|node| Some((node["nodeId"].as_str()?, node)))
        .collect();
    let root = nodes
        .iter()
        .find(|node| node.get("parentId").is_none())
        .or(nodes.first());
    let mut out = Snapshot {
        text: String::new(),
        refs: Vec::new(),
    };
    if let Some(root) = root {
        walk(root, &by_id, 0, "", &mut out);
    }
    out
}

fn string<'a>(node: &'a Value, key: &str) -> &'a str {
    node[key]["value"].as_str().unwrap_or_default()
}

fn walk(
    node: &Value,
    by_id: &HashMap<&str, &Value>,
    depth: usize,
    above: &str,
    out: &mut Snapshot,
) {
    let role = string(node, "role");
    let name = string(node, "name").trim();
    let ignored = node["ignored"].as_bool().unwrap_or(false);
    let hidden = ignored
        || role.is_empty()
        || PIECES.contains(&role)
        || (STRUCTURE.contains(&role) && name.is_empty())
        || (role == "RootWebArea" && depth > 0)
        // Text already said by the element it is in.
        || (role == "StaticText" && (name.is_empty() || above.contains(name)));
    let shown = !hidden;
    let (child_depth, child_above) = if shown {
        let mut line = "  ".repeat(depth);
        let backend = node["backendDOMNodeId"].as_i64();
        if let Some(backend) = backend.filter(|_| ACTIONABLE.contains(&role)) {
            out.refs.push(backend);
            line.push_str(&format!("[{}] ", out.refs.len()));
        }
        line.push_str(if role == "StaticText" { "text" } else { role });
        if !name.is_empty() {
            line.push_str(&format!(" {name:?}"));
        }
        let value = match &node["value"]["value"] {
            Value::String(text) => text.clone(),
            Value::Number(number) => number.to_string(),
            _ => String::new(),
        };
        if !value.is_empty() && value != name {
            line.push_str(&format!(" value={value:?}"));
        }
        let states: Vec<String> = node["properties"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|property| {
                let key = property["name"].as_str()?;
                if !STATES.contains(&key) {
                    return None;
                }
                match &property["value"]["value"] {
                    Value::Bool(true) => Some(key.to_owned()),
                    Value::String(state) if state == "true" => Some(key.to_owned()),
                    Value::String(state) if state == "mixed" => Some(format!("{key}=mixed")),
                    _ => None,
                }
            })
            .collect();
        if !states.is_empty() {
            line.push_str(&format!(" ({})", states.join(", ")));
        }
        line.push('\n');
        out.text.push_str(&line);
        (depth + 1, name)
    } else {
        (depth, above)
    };
    for child in node["childIds"].as_array().into_iter().flatten() {
        if let Some(child) = child.as_str().and_then(|id| by_id.get(id)) {
            walk(child, by_id, child_depth, child_above, out);
        }
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;
    use serde_json::json;

    use super::*;

    #[test]
    fn numbers_what_can_be_acted_on_and_drops_repeated_text_and_structure() {
        let value = |v: &str| json!({"type": "string", "value": v});
        let nodes = vec![
            json!({"nodeId": "1", "ignored": false, "role": value("RootWebArea"),
                   "name": value("Order"), "childIds": ["2", "5"], "backendDOMNodeId": 1}),
            json!({"nodeId": "2", "parentId": "1", "ignored": false, "role": value("generic"),
                   "name": value(""), "childIds": ["3", "4"], "backendDOMNodeId": 2}),
            json!({"nodeId": "3", "parentId": "2", "ignored": false, "role": value("heading"),
                   "name": value("Your order"), "childIds": ["6"], "backendDOMNodeId": 3}),
            json!({"nodeId": "6", "parentId": "3", "ignored": false, "role": value("StaticText"),
                   "name": value("Your order"), "backendDOMNodeId": 6}),
            json!({"nodeId": "4", "parentId": "2", "ignored": false, "role": value("textbox"),
                   "name": value("Name"), "value": value("Ada"), "backendDOMNodeId": 4,
                   "properties": [{"name": "required", "value": {"type": "boolean", "value": true}},
                                  {"name": "focusable", "value": {"type": "boolean", "value": true}}]}),
            json!({"nodeId": "5", "parentId": "1", "ignored": true, "role": value("none"),
                   "backendDOMNodeId": 5}),
        ];
        assert_eq!(
            render(&nodes),
            Snapshot {
                text: "RootWebArea \"Order\"\n  heading \"Your order\"\n  [1] textbox \"Name\" \
                       value=\"Ada\" (required)\n"
                    .into(),
                refs: vec![4],
            }
        );
    }
}
