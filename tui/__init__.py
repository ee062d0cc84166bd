"""The Textual face of the advisor (built in a later issue); it calls `advisor`'s functions only."""
