//! Memory on disk: session transcripts and workspace memory files.
