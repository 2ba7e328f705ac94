//! An MCP tool's input schema in the shape every provider takes. Servers write whatever JSON
//! Schema their SDK produces (pydantic's `$defs` and `$ref`s, zod's `$schema`); providers want
//! an object with `properties`, and some (Gemini, several OpenAI-compatible servers) reject
//! references. Each provider's own rules (Gemini's keyword list) are applied after this, when
//! the request is written.

use serde_json::{Map, Value, json};

/// Keywords whose value is one schema, or (`items` of old drafts) a list of them.
const SCHEMA_KEYWORDS: [&str; 11] = [
    "items",
    "additionalItems",
    "additionalProperties",
    "unevaluatedItems",
    "unevaluatedProperties",
    "not",
    "if",
    "then",
    "else",
    "contains",
    "propertyNames",
];
/// Keywords whose value is a list of schemas.
const SCHEMA_LIST_KEYWORDS: [&str; 4] = ["anyOf", "oneOf", "allOf", "prefixItems"];
/// Keywords whose value maps names to schemas.
const SCHEMA_MAP_KEYWORDS: [&str; 3] = ["properties", "patternProperties", "dependentSchemas"];
/// Keywords no provider needs: where the definitions were, and notes about the schema.
const DROPPED_KEYWORDS: [&str; 5] = ["$schema", "$id", "$defs", "definitions", "$comment"];

/// Schemas (objects) a cleaned schema may hold in all, and references inlined inside one
/// another: a server's schema is untrusted, and two references per definition down a chain of
/// 30 would otherwise grow to a billion nodes (or a long chain overflow the stack).
const MAX_SCHEMAS: usize = 2_000;
const MAX_INLINED_DEPTH: usize = 8;

/// Where inlining stands: the definitions being inlined around the schema being cleaned (a
/// definition that refers to itself ends instead of growing without end), and how many more
/// schemas the result may hold. Past either bound a schema becomes `{}`, any value.
struct Inlining {
    expanding: Vec<String>,
    schemas_left: usize,
}

/// `schema` with its local references (`#/$defs/Name`, `#/definitions/Name`) replaced by what
/// they name (a reference inside its own definition becomes `{}`, any value), `$schema`, `$id`,
/// `$defs` and comments left out, and at the top an object with `properties`.
pub fn clean_schema(schema: &Map<String, Value>) -> Value {
    let definitions: Map<String, Value> = ["$defs", "definitions"]
        .iter()
        .filter_map(|key| schema.get(*key)?.as_object())
        .flat_map(|defs| defs.iter().map(|(name, def)| (name.clone(), def.clone())))
        .collect();
    let mut cleaned = clean(
        &Value::Object(schema.clone()),
        &definitions,
        &mut Inlining {
            expanding: Vec::new(),
            schemas_left: MAX_SCHEMAS,
        },
    );
    let Value::Object(top) = &mut cleaned else {
        return json!({"type": "object", "properties": {}});
    };
    if top.get("type").and_then(Value::as_str) != Some("object") {
        top.insert("type".to_owned(), json!("object"));
    }
    if !top.get("properties").is_some_and(Value::is_object) {
        top.insert("properties".to_owned(), json!({}));
    }
    cleaned
}

/// One schema cleaned.
fn clean(schema: &Value, definitions: &Map<String, Value>, inlining: &mut Inlining) -> Value {
    let Value::Object(map) = schema else {
        // `true` and `false` are schemas too.
        return schema.clone();
    };
    if inlining.schemas_left == 0 {
        return json!({});
    }
    inlining.schemas_left -= 1;
    if let Some(reference) = map.get("$ref").and_then(Value::as_str) {
        let name = reference
            .strip_prefix("#/$defs/")
            .or_else(|| reference.strip_prefix("#/definitions/"));
        let mut inlined = match name.and_then(|name| Some((name, definitions.get(name)?))) {
            Some((name, definition))
                if !inlining.expanding.iter().any(|n| n == name)
                    && inlining.expanding.len() < MAX_INLINED_DEPTH =>
            {
                inlining.expanding.push(name.to_owned());
                let inlined = clean(definition, definitions, inlining);
                inlining.expanding.pop();
                inlined
            }
            // A reference to itself, too deep, or to something outside this schema: any value.
            Some(_) | None => json!({}),
        };
        // What is written beside the reference (a description) says more than the definition.
        if let Value::Object(target) = &mut inlined {
            for (key, value) in map.iter().filter(|(key, _)| *key != "$ref") {
                target.insert(
                    key.clone(),
                    clean_keyword(key, value, definitions, inlining),
                );
            }
        }
        return inlined;
    }
    Value::Object(
        map.iter()
            .filter(|(key, _)| !DROPPED_KEYWORDS.contains(&key.as_str()))
            .map(|(key, value)| {
                (
                    key.clone(),
                    clean_keyword(key, value, definitions, inlining),
                )
            })
            .collect(),
    )
}

/// The value of keyword `key` cleaned: schemas in it are cleaned, data (`enum`, `default`,
/// `examples`...) is left as it is.
fn clean_keyword(
    key: &str,
    value: &Value,
    definitions: &Map<String, Value>,
    inlining: &mut Inlining,
) -> Value {
    match value {
        Value::Object(map) if SCHEMA_MAP_KEYWORDS.contains(&key) => Value::Object(
            map.iter()
                .map(|(name, schema)| (name.clone(), clean(schema, definitions, inlining)))
                .collect(),
        ),
        Value::Array(items)
            if SCHEMA_LIST_KEYWORDS.contains(&key) || SCHEMA_KEYWORDS.contains(&key) =>
        {
            Value::Array(
                items
                    .iter()
                    .map(|schema| clean(schema, definitions, inlining))
                    .collect(),
            )
        }
        Value::Object(_) if SCHEMA_KEYWORDS.contains(&key) => clean(value, definitions, inlining),
        Value::Null
        | Value::Bool(_)
        | Value::Number(_)
        | Value::String(_)
        | Value::Array(_)
        | Value::Object(_) => value.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn object(value: Value) -> Map<String, Value> {
        match value {
            Value::Object(map) => map,
            other => panic!("not an object: {other}"),
        }
    }

    #[test]
    fn a_pydantic_schema_is_inlined_and_stripped() {
        let schema = object(json!({
            "$schema": "http://json-schema.org/draft-07/schema#",
            "$defs": {
                "Priority": {"type": "string", "enum": ["low", "high"]},
                "Node": {
                    "type": "object",
                    "properties": {
                        "label": {"type": "string"},
                        "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}}
                    }
                }
            },
            "properties": {
                "title": {"type": "string", "description": "What to do"},
                "priority": {"$ref": "#/$defs/Priority", "description": "How urgent"},
                "tree": {"anyOf": [{"$ref": "#/$defs/Node"}, {"type": "null"}], "default": null},
                "definitions": {"type": "object", "default": {"$ref": "kept: this is data"}}
            },
            "required": ["title"],
            "additionalProperties": false
        }));
        insta::assert_json_snapshot!(clean_schema(&schema));
    }

    #[test]
    fn the_top_is_always_an_object_with_properties() {
        assert_eq!(
            clean_schema(&Map::new()),
            json!({"type": "object", "properties": {}})
        );
        assert_eq!(
            clean_schema(&object(
                json!({"type": "object", "$ref": "https://example.com/x"})
            )),
            json!({"type": "object", "properties": {}})
        );
    }

    /// Objects in `value`, and how deep they nest.
    fn measure(value: &Value) -> (usize, usize) {
        match value {
            Value::Object(map) => map
                .values()
                .map(measure)
                .fold((1, 1), |(n, d), (cn, cd)| (n + cn, d.max(cd + 1))),
            Value::Array(items) => items
                .iter()
                .map(measure)
                .fold((0, 0), |(n, d), (cn, cd)| (n + cn, d.max(cd))),
            Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) => (0, 0),
        }
    }

    #[test]
    fn a_hostile_schema_cannot_grow_without_end() {
        // Two references to the next definition, 30 deep: 2^30 schemas if inlined in full.
        let doubling: Map<String, Value> = (0..30)
            .map(|i| {
                let next = json!({"$ref": format!("#/$defs/D{}", i + 1)});
                (
                    format!("D{i}"),
                    json!({"type": "object", "properties": {"a": next, "b": next}}),
                )
            })
            .collect();
        let schema =
            object(json!({"$defs": doubling, "properties": {"x": {"$ref": "#/$defs/D0"}}}));
        let (objects, _) = measure(&clean_schema(&schema));
        assert!(objects <= 2 * MAX_SCHEMAS, "{objects} objects");

        // A chain of 10,000 definitions, each referring to the next.
        let chain: Map<String, Value> = (0..10_000)
            .map(|i| {
                let next = json!({"$ref": format!("#/$defs/D{}", i + 1)});
                (
                    format!("D{i}"),
                    json!({"type": "object", "properties": {"n": next}}),
                )
            })
            .collect();
        let schema = object(json!({"$defs": chain, "properties": {"x": {"$ref": "#/$defs/D0"}}}));
        let (_, depth) = measure(&clean_schema(&schema));
        assert!(depth <= 2 * (MAX_INLINED_DEPTH + 2), "nested {depth} deep");
    }
}
