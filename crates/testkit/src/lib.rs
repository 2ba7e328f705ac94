//! Loopback fakes for tests.
