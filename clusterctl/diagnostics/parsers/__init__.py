"""One parser module per output kind; each exposes ``parse_<kind>(text) -> Model``."""
