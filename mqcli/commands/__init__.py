"""Commands grouped by noun; each parses, makes one store call, renders."""
