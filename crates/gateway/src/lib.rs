//! The long-running side of nanocrab: channels in, turns run per session, answers out, and
//! the HTTP server.
