"""The flags of the user's own vLLM: read from its parser, refused or allowed, checked by it."""
