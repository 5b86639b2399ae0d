//! Shared code for weir's command-line programs.
