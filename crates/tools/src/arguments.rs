//! Turning the model's tool input into a tool's typed arguments, with messages that say what
//! the tool expects.

use serde::de::DeserializeOwned;

use crate::tool::ToolError;

/// `expected` describes the object, e.g. "`path` (string) and optional `offset`, `limit`".
pub(crate) fn parse_arguments<T: DeserializeOwned>(
    tool: &str,
    input: serde_json::Value,
    expected: &str,
) -> Result<T, ToolError> {
    let got = match &input {
        serde_json::Value::Object(_) => {
            return serde_json::from_value(input).map_err(|err| {
                ToolError::InvalidArguments(format!(
                    "invalid arguments for {tool}: {err}; expected a JSON object with {expected}"
                ))
            });
        }
        serde_json::Value::String(_) => "a string (unparsable JSON?)",
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::Array(_) => "an array",
    };
    Err(ToolError::InvalidArguments(format!(
        "arguments must be a JSON object with {expected}; got {got}"
    )))
}
