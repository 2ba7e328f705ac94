use std::fmt;

use serde::{Deserialize, Serialize};

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            /// A fresh random id.
            pub fn new() -> Self {
                Self(uuid::Uuid::new_v4().simple().to_string())
            }

            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl Default for $name {
            fn default() -> Self {
                Self::new()
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl From<String> for $name {
            fn from(value: String) -> Self {
                Self(value)
            }
        }
    };
}

id_type!(
    /// Ties together everything caused by one inbound message, across runs and subagents.
    TraceId
);
id_type!(
    /// A unit of work the user asked for; may take several runs.
    TaskId
);
id_type!(
    /// One execution of the agent loop: from a user message to a final answer.
    RunId
);
id_type!(
    /// One model call or one tool call inside a run.
    StepId
);
