//! Policy: what tools may touch and run.
