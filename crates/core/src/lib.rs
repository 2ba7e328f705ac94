//! The agent: context building and the tool-calling loop.
