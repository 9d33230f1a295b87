//! No file in the working directory steers a command (filled in by the lead).
