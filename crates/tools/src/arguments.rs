//! Built-in tools with typed arguments: the arguments are parsed once, into a struct whose JSON
//! schema (the one the model is shown) and whose "expected ..." text for bad input are both
//! derived from the type.

use std::future::Future;

use nanocrab_policy::Invocation;
use nanocrab_schema::ToolDef;
use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::tool::{PreparedCall, Tool, ToolContext, ToolError, ToolOutput};

/// A tool whose arguments are a Rust type; [`Tool`] comes with it. Field doc comments become the
/// field descriptions the model sees, and `#[schemars(range(min = 1))]` on an integer says
/// "positive" in the error for bad input (the bound itself is not sent, to keep requests short).
pub trait TypedTool: Send + Sync {
    type Args: DeserializeOwned + JsonSchema + Send;

    const NAME: &'static str;

    fn description(&self) -> String;

    /// The schema sent to the model; a tool whose field descriptions depend on its config
    /// adjusts [`parameters`].
    fn parameters(&self) -> Value {
        parameters::<Self::Args>()
    }

    /// What a call with `args` needs (capabilities, risk), worked out before anything runs.
    fn invocation(&self, args: &Self::Args, ctx: &ToolContext) -> Result<Invocation, ToolError>;

    fn call(
        &self,
        args: Self::Args,
        ctx: &ToolContext,
    ) -> impl Future<Output = Result<ToolOutput, ToolError>> + Send;
}

impl<T: TypedTool> Tool for T {
    fn definition(&self) -> ToolDef {
        ToolDef {
            name: T::NAME.into(),
            description: self.description(),
            parameters: self.parameters(),
        }
    }

    fn prepare<'a>(
        &'a self,
        input: Value,
        ctx: &'a ToolContext,
    ) -> Result<PreparedCall<'a>, ToolError> {
        let args: T::Args = parse_arguments(T::NAME, input)?;
        let invocation = TypedTool::invocation(self, &args, ctx)?;
        Ok(PreparedCall::new(
            invocation,
            TypedTool::call(self, args, ctx),
        ))
    }
}

/// The schema of `A` as the model is shown it: the object's properties, their types and
/// descriptions, which are required; none of the meta-schema, titles, integer formats and
/// bounds, or nullability of optional fields that schemars adds and the model does not need.
pub fn parameters<A: JsonSchema>() -> Value {
    let mut schema = schema_of::<A>();
    if let Some(root) = schema.as_object_mut() {
        for key in ["title", "description", "additionalProperties"] {
            root.shift_remove(key);
        }
        if let Some(Value::Object(properties)) = root.get_mut("properties") {
            for property in properties.values_mut().filter_map(Value::as_object_mut) {
                for key in ["format", "minimum"] {
                    property.shift_remove(key);
                }
                // schemars lets an optional field be null too; a missing field says the same.
                if let Some(Value::Array(kinds)) = property.get("type") {
                    let kinds: Vec<Value> = kinds
                        .iter()
                        .filter(|kind| kind.as_str() != Some("null"))
                        .cloned()
                        .collect();
                    if let [kind] = kinds.as_slice() {
                        property.insert("type".into(), kind.clone());
                    }
                }
            }
        }
    }
    schema
}

fn schema_of<A: JsonSchema>() -> Value {
    SchemaSettings::draft2020_12()
        .with(|settings| {
            settings.meta_schema = None;
            settings.inline_subschemas = true;
        })
        .into_generator()
        .into_root_schema_for::<A>()
        .to_value()
}

/// Parses the model's tool input, or says what the tool expects and what it got.
fn parse_arguments<A: DeserializeOwned + JsonSchema>(
    tool: &str,
    input: Value,
) -> Result<A, ToolError> {
    let got = match &input {
        Value::Object(_) => {
            return serde_json::from_value(input).map_err(|err| {
                ToolError::InvalidArguments(format!(
                    "invalid arguments for {tool}: {err}; expected a JSON object with {}",
                    expected::<A>()
                ))
            });
        }
        Value::String(_) => "a string (unparsable JSON?)",
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::Array(_) => "an array",
    };
    Err(ToolError::InvalidArguments(format!(
        "arguments must be a JSON object with {}; got {got}",
        expected::<A>()
    )))
}

/// The fields of `A` in words, e.g. "`path` (string) and optional `offset`, `limit` (positive
/// integers)": the required ones first, neighbours of one type sharing it.
fn expected<A: JsonSchema>() -> String {
    let schema = schema_of::<A>();
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|names| names.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let properties = schema.get("properties").and_then(Value::as_object);
    // (name, kind) in declaration order.
    let fields: Vec<(&str, String)> = properties
        .into_iter()
        .flatten()
        .map(|(name, property)| {
            let kind = match property.get("type") {
                Some(Value::String(kind)) => kind.as_str(),
                Some(Value::Array(kinds)) => kinds
                    .iter()
                    .filter_map(Value::as_str)
                    .find(|kind| *kind != "null")
                    .unwrap_or("value"),
                Some(_) | None => "value",
            };
            let positive = property
                .get("minimum")
                .and_then(Value::as_f64)
                .is_some_and(|minimum| minimum >= 1.0);
            let kind = if positive && kind == "integer" {
                "positive integer".to_owned()
            } else {
                kind.to_owned()
            };
            (name.as_str(), kind)
        })
        .collect();
    let describe = |optional: bool| {
        let mut groups: Vec<(Vec<&str>, &str)> = Vec::new();
        for (name, kind) in fields
            .iter()
            .filter(|(name, _)| required.contains(name) != optional)
        {
            match groups.last_mut() {
                Some((names, last)) if *last == kind.as_str() => names.push(name),
                Some(_) | None => groups.push((vec![name], kind)),
            }
        }
        groups
            .iter()
            .map(|(names, kind)| {
                let quoted: Vec<String> = names.iter().map(|name| format!("`{name}`")).collect();
                let listed = match quoted.split_last() {
                    Some((last, rest)) if !rest.is_empty() && !optional => {
                        format!("{} and {last}", rest.join(", "))
                    }
                    Some(_) | None => quoted.join(", "),
                };
                let plural = if names.len() > 1 { "s" } else { "" };
                format!("{listed} ({kind}{plural})")
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    let (required, optional) = (describe(false), describe(true));
    match (required.is_empty(), optional.is_empty()) {
        (_, true) => required,
        (true, false) => format!("optional {optional}"),
        (false, false) => format!("{required} and optional {optional}"),
    }
}
