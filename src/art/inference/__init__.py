"""Engine protocol, the built-in torch engine, chat templates and tool-call parsing (heavy side)."""
